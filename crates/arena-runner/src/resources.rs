//! What each task run's containers get: CPUs (a share of the host for each GPU slot, as a
//! CFS quota), memory (the task's `memory_limit`, else the run's `--memory`, else 16 GiB), a
//! pids limit, and a workspace file system of a set size.

use arena_runtime::Limits;

pub const DEFAULT_MEMORY: u64 = 16 << 30;
pub const DEFAULT_WORKSPACE: u64 = 4 << 30;

#[derive(Debug, Clone, PartialEq)]
pub struct Resources {
    /// CPUs for each GPU slot's containers; None: no quota.
    pub cpus_per_slot: Option<f64>,
    pub workspace_bytes: u64,
}

impl Default for Resources {
    fn default() -> Self {
        Resources {
            cpus_per_slot: None,
            workspace_bytes: DEFAULT_WORKSPACE,
        }
    }
}

impl Resources {
    /// The host's CPUs shared out over `slots` GPU slots (or `cpus_per_gpu` each).
    pub fn for_host(slots: usize, cpus_per_gpu: Option<f64>, workspace: Option<u64>) -> Resources {
        let host = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as f64;
        Resources {
            cpus_per_slot: Some(cpus_per_gpu.unwrap_or(host / slots.max(1) as f64).max(0.1)),
            workspace_bytes: workspace.unwrap_or(DEFAULT_WORKSPACE),
        }
    }

    /// The limits of a container of a task with `task_memory` (its own limit) in a run with
    /// `run_memory` (`--memory`).
    pub fn limits(&self, task_memory: Option<u64>, run_memory: Option<u64>) -> Limits {
        let memory = task_memory.or(run_memory).unwrap_or(DEFAULT_MEMORY);
        Limits {
            memory_bytes: memory.min(i64::MAX as u64) as i64,
            cpus: self.cpus_per_slot,
            ..Limits::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_beats_the_run_beats_the_default_and_cpus_are_shared_out() {
        let r = Resources::for_host(2, None, None);
        let host = std::thread::available_parallelism().unwrap().get() as f64;
        assert_eq!(r.cpus_per_slot, Some((host / 2.0).max(0.1)));
        assert_eq!(r.limits(Some(1 << 30), Some(2 << 30)).memory_bytes, 1 << 30);
        assert_eq!(r.limits(None, Some(2 << 30)).memory_bytes, 2 << 30);
        assert_eq!(r.limits(None, None).memory_bytes, 16 << 30);
        assert_eq!(
            Resources::for_host(1, Some(3.0), Some(5)).workspace_bytes,
            5
        );
        assert_eq!(r.limits(None, None).pids, 4096);
    }
}
