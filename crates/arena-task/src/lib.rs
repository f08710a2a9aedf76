//! arena-task: the task model. Reads AgentKernelArena task directories (`config.yaml`, sources,
//! harness), validates them with errors that name file and field, and computes the canonical
//! content digest of a task tree.

pub mod canonical;
pub mod config;
pub mod declarations;
pub mod derive;
pub mod digest;
pub mod discover;
pub mod error;
mod fields;
pub mod harness_overlay;
pub mod helpers;
pub mod hidden;
pub mod id;
pub mod iterations;
pub mod paths;
pub mod shapes;
pub mod split;
pub mod task;
pub mod task_type;
pub mod unseen;

pub use canonical::{discover_all_canonical, discover_canonical, Discovery};
pub use config::{PromptConfig, TaskConfig};
pub use digest::{harness_digest, task_digest, task_tree, EntryKind, TreeEntry};
pub use discover::{discover, discover_all, FoundTask};
pub use error::{TaskError, TaskErrors};
pub use id::{BadTaskId, TaskId};
pub use task::{Task, CONFIG_FILE};
pub use task_type::{TaskType, KNOWN_TASK_TYPES};
