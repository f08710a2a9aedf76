//! Task types: the ones seen in the AgentKernelArena tree plus our own CPU type.

use serde::{Deserialize, Serialize};

/// Task types known to arena. An unknown type is kept verbatim (a warning, not an error),
/// so a newer AgentKernelArena tree still loads.
pub const KNOWN_TASK_TYPES: &[&str] = &[
    "hip2hip",
    "triton2triton",
    "torch2hip",
    "instruction2triton",
    "triton2flydsl",
    "torch2flydsl",
    "flydsl2flydsl",
    "image_kernel",
    "repository",
    // KernelBench problems imported by `arenactl task import kernelbench` (arena-kernelbench).
    "kernelbench",
    // arena's own: pure-Python kernels timed on the CPU, so the pipeline runs without a GPU.
    "python2python",
    // arena's own, KernelCraft-style: C kernels for a RISC-V core, timed in simulated cycles
    // (images/rv32sim.toml; docs/simulated-tasks.md).
    "c2rv32",
];

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskType(pub String);

impl TaskType {
    pub fn is_known(&self) -> bool {
        KNOWN_TASK_TYPES.contains(&self.0.as_str())
    }

    /// Whether the harness of this type needs a GPU to run.
    pub fn needs_gpu(&self) -> bool {
        !matches!(self.0.as_str(), "python2python" | "c2rv32")
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TaskType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
