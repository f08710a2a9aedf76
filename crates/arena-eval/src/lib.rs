//! arena-eval: the gated evaluation (compile → correctness → performance) as it runs inside an
//! evaluator container. It owns what the container is given — arena's trusted evaluator (for
//! tasks with a trusted harness) or the job of its gate runner (for tasks whose harness is
//! their own), the layout of the mounts, the agent's declared source files taken out of the
//! workspace — and how what the container wrote, read as something hostile wrote it, becomes
//! an [`record::Evaluation`]. Starting the container is the runner's job.

pub mod aka_perf;
pub mod autotune;
pub mod collect;
pub mod cross_check;
pub mod error;
pub mod evaluator_record;
pub mod gate;
pub mod layout;
pub mod paired;
pub mod record;
pub mod self_reported;
pub mod sources;
pub mod timeouts;
pub mod trusted;
pub mod untrusted;

pub use collect::{collect, Reading};
pub use error::EvalError;
pub use gate::{Gate, GATES};
pub use self_reported::{read_probe, GatesJob};
pub use sources::stage_sources;
pub use timeouts::GateTimeouts;
