//! The three gates, in the order they run.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Gate {
    Compile,
    Correctness,
    Performance,
}

pub const GATES: [Gate; 3] = [Gate::Compile, Gate::Correctness, Gate::Performance];

impl Gate {
    pub fn name(self) -> &'static str {
        match self {
            Gate::Compile => "compile",
            Gate::Correctness => "correctness",
            Gate::Performance => "performance",
        }
    }

    /// The report the harness writes under `build/` (AgentKernelArena convention).
    pub fn report_file(self) -> &'static str {
        match self {
            Gate::Compile => "compile_report.json",
            Gate::Correctness => "correctness_report.json",
            Gate::Performance => "performance_report.json",
        }
    }

    pub fn from_name(name: &str) -> Option<Gate> {
        GATES.into_iter().find(|g| g.name() == name)
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
