//! arena-kernelbench: KernelBench problems (`Model`, `get_inputs`, `get_init_inputs`) as arena
//! tasks that the trusted evaluator runs.
//!
//! A problem file becomes a task directory: the problem itself under `reference/` (byte for
//! byte), the agent's starting point `source/model_new.py` (KernelBench's `Model` renamed
//! `ModelNew`, so that the baseline is PyTorch eager), a trusted harness
//! `scripts/task_runner.py` (its visible configuration is the problem's own size constants,
//! which unseen sets rewrite; inputs from the evaluator's secret seed, weights from one shared
//! seed, KernelBench's tolerances) and `config.yaml`. Importing is a pure function of the
//! problem bytes: the same files give the same task digests.

mod error;
mod problem;
mod write;

pub use error::ImportError;
pub use problem::{Problem, Skipped};
pub use write::{import, write_task, Imported, ImportedProblem, TASK_TYPE};
