//! arena-runner: the daemon that carries out benchmark runs on one machine. It leases one GPU
//! per task run, queues task runs so that every GPU stays busy, and takes each task through its
//! lifecycle — locked image, workspace, baseline evaluation, agent container, evaluator
//! container, task result — with state written atomically to the run directory, so a runner
//! restarted on it resumes. It serves `arena.v1.Runner` over gRPC.

pub mod agent;
pub mod engine;
pub mod error;
pub mod events;
pub mod gpus;
pub mod lifecycle;
pub mod prompt;
pub mod rundir;
pub mod scheduler;
pub mod service;

pub use agent::Agent;
pub use engine::{plan, Engine, ExecRequest, Plan, RunHandle, RunRequest};
pub use error::{Result, RunnerError};
pub use gpus::{parse_gpus, restrict_visible, Gpu};
pub use service::RunnerService;
