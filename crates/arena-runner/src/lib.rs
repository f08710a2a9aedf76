//! arena-runner: the daemon that carries out benchmark runs on one machine. It leases one GPU
//! per task run, queues task runs so that every GPU stays busy, and takes each task through its
//! lifecycle — locked image, workspace, baseline evaluation, agent container, evaluator
//! container, task result — with state written atomically to the run directory, so a runner
//! restarted on it resumes. Containers go through arena-runtime's `ContainerRuntime` boundary;
//! the run itself is arena-run's model. It serves `arena.v1.Runner` over gRPC.

pub mod auth;
pub mod client_paths;
pub mod device_state;
pub mod engine;
pub mod error;
pub mod evaluate;
pub mod gpus;
#[cfg(test)]
mod parse_properties;
pub mod policy;
mod reach;
#[cfg(test)]
mod request_properties;
pub mod resources;
pub mod scheduler;
pub mod service;
pub mod task_run;
#[cfg(test)]
pub(crate) mod testing;

pub use auth::{Authenticator, Tokens};
pub use engine::{Engine, ExecRequest, RunHandle};
pub use error::{Result, RunnerError};
pub use gpus::{parse_gpus, restrict_visible, Gpu};
pub use policy::Policy;
pub use resources::Resources;
pub use service::RunnerService;
