//! arena-run: a benchmark run as data, with no container engine in sight. What a client
//! asks for ([`plan::RunRequest`]) and what it is checked into ([`plan::Plan`]: the lockfile,
//! the task trees against their locked digests, the agent file, the sealed hidden set); the
//! agent files and the prompt; the run directory with its record and one result per task
//! run, written atomically; the task result record; the run's progress events. The runner
//! (local, containerd) and the Slurm head both work from this model.

pub mod agent;
pub mod crash;
pub mod error;
pub mod events;
pub mod hidden;
pub mod plan;
pub mod probe;
pub mod prompt;
pub mod result;
pub mod rundir;
pub mod secrets;

pub use agent::{Agent, AgentImage, AgentNetwork};
pub use error::{Result, RunError};
pub use hidden::HiddenSet;
pub use plan::{plan, select, Plan, RunRequest};
pub use result::{ProbeRun, Provenance, TaskResult, Timings, Trust};
pub use rundir::{Item, RunDir, RunRecord};
pub use secrets::Secrets;
