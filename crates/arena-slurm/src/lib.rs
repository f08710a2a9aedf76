//! arena-slurm: runs an arena run on a Slurm cluster instead of one machine's runner. The head
//! (`arenactl run --backend slurm`) submits one job per (task, repeat) with `--gres=gpu:1`; each
//! job runs the runner in one-shot mode (`arenactl runner exec`) on its node, against that
//! node's containerd and the GPU Slurm assigned, and writes its task result atomically into the
//! shared run directory. The head follows the jobs (squeue) and the result files, retries jobs
//! that die with Slurm's reason recorded, and on restart submits only what has neither a result
//! nor a live job. Slurm itself is driven through its commands (sbatch, squeue, scancel).
//! The head works from arena-run's model of a run; it never touches a container engine.

pub mod commands;
pub mod error;
pub mod follow;
pub mod head;
pub mod job;
pub mod ledger;

pub use commands::{JobInfo, JobState, SlurmCli, SlurmCommands};
pub use error::{Result, SlurmError};
pub use follow::{Backend, Backoff, Summary};
pub use head::{cancel_run, prepare, Head, HeadRequest};
pub use job::{job_name, parse_job_name, JobSpec};
