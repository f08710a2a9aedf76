//! arena-eval: the gated evaluation (compile → correctness → performance) as it runs inside an
//! evaluator container. It owns what the container is given — the gate script, the layout of
//! its mounts, the agent's declared source files copied out of the workspace — and how its
//! reports become an [`record::Evaluation`]. Starting the container is the runner's job.

pub mod collect;
pub mod error;
pub mod gate;
pub mod layout;
pub mod probe;
pub mod record;
pub mod script;
pub mod sources;
pub mod trusted;
pub mod untrusted;

pub use collect::collect;
pub use error::EvalError;
pub use gate::{Gate, GATES};
pub use probe::{probe_script, read_probe};
pub use script::{gate_script, GateTimeouts};
pub use sources::stage_sources;
