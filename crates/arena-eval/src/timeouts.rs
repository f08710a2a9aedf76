//! How long each gate may run, and which commands it runs.

use arena_task::TaskConfig;

use crate::gate::Gate;

/// Seconds each gate may run. A task's `compile_timeout`… fields override the defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateTimeouts {
    pub compile: u64,
    pub correctness: u64,
    pub performance: u64,
}

impl Default for GateTimeouts {
    fn default() -> Self {
        GateTimeouts {
            compile: 600,
            correctness: 900,
            performance: 1800,
        }
    }
}

impl GateTimeouts {
    pub fn for_task(cfg: &TaskConfig) -> GateTimeouts {
        let d = GateTimeouts::default();
        let secs =
            |v: Option<f64>, default: u64| v.map(|s| s.ceil().max(1.0) as u64).unwrap_or(default);
        GateTimeouts {
            compile: secs(cfg.compile_timeout, d.compile),
            correctness: secs(cfg.correctness_timeout, d.correctness),
            performance: secs(cfg.performance_timeout, d.performance),
        }
    }

    pub fn get(&self, g: Gate) -> u64 {
        match g {
            Gate::Compile => self.compile,
            Gate::Correctness => self.correctness,
            Gate::Performance => self.performance,
        }
    }

    /// What the whole container may take: every gate plus a margin for start-up.
    pub fn total(&self) -> u64 {
        self.compile + self.correctness + self.performance + 60
    }
}

pub fn commands(cfg: &TaskConfig, g: Gate) -> &[String] {
    match g {
        Gate::Compile => &cfg.compile_command,
        Gate::Correctness => &cfg.correctness_command,
        Gate::Performance => &cfg.performance_command,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_come_from_the_task_or_defaults() {
        let text =
            "task_type: triton2triton\nsource_file_path: [k.py]\ntarget_kernel_functions: [k]\n\
             compile_command: [\"python3 run.py compile\"]\n\
             correctness_command: [\"python3 run.py correctness\"]\n\
             performance_command: [\"python3 run.py performance\"]\n\
             compile_timeout: 30\nperformance_timeout: 12.5\n";
        let cfg = TaskConfig::parse(std::path::Path::new("config.yaml"), text).unwrap();
        let t = GateTimeouts::for_task(&cfg);
        assert_eq!((t.compile, t.correctness, t.performance), (30, 900, 13));
        assert_eq!(t.total(), 30 + 900 + 13 + 60);
        assert_eq!(
            commands(&cfg, Gate::Performance),
            ["python3 run.py performance"]
        );
    }
}
