//! What each container of a task run is for. Whether a container is given hidden
//! configurations decides how little of it is kept (its logs, its kernels' output, its gate
//! messages): that is a property of the phase, asked of the type, never read off how a name
//! is spelled (issue 42: a typo in a string prefix would have leaked a hidden configuration).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerPhase {
    /// The original kernel, evaluated as the agent's will be.
    Baseline,
    Agent,
    /// The agent's kernel (paired with the original where it can be).
    Candidate,
    /// Arena's trusted evaluator on the hidden configurations: both kernels in one container.
    Unseen,
    /// A task's own commands on the hidden configurations, one kernel (`agent`: the agent's,
    /// else the original) at a time.
    UnseenKernel {
        agent: bool,
        step: UnseenStep,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnseenStep {
    /// Every configuration in one evaluation.
    Whole,
    /// Correctness per configuration, after a whole evaluation that failed.
    Probe,
    /// Configuration `k` of an evaluation per configuration (its events; one container runs
    /// them all).
    Config(usize),
}

impl ContainerPhase {
    pub const UNSEEN_ORIGINAL: ContainerPhase = ContainerPhase::UnseenKernel {
        agent: false,
        step: UnseenStep::Whole,
    };
    pub const UNSEEN_OPTIMIZED: ContainerPhase = ContainerPhase::UnseenKernel {
        agent: true,
        step: UnseenStep::Whole,
    };

    /// Whether the container is given hidden configurations: its logs are drained, never
    /// kept, its kernels' output goes nowhere, and its gate messages are redacted.
    pub fn sees_hidden(self) -> bool {
        matches!(
            self,
            ContainerPhase::Unseen | ContainerPhase::UnseenKernel { .. }
        )
    }

    /// The same kernel's step `step` on the hidden set.
    pub fn step(self, step: UnseenStep) -> ContainerPhase {
        match self {
            ContainerPhase::UnseenKernel { agent, .. } => {
                ContainerPhase::UnseenKernel { agent, step }
            }
            other => other,
        }
    }
}

/// The name in container ids, directories and events: `baseline`, `agent`, `candidate`,
/// `unseen`, `unseen-original`, `unseen-optimized`, then `-probe` or `-K`.
impl fmt::Display for ContainerPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContainerPhase::Baseline => f.write_str("baseline"),
            ContainerPhase::Agent => f.write_str("agent"),
            ContainerPhase::Candidate => f.write_str("candidate"),
            ContainerPhase::Unseen => f.write_str("unseen"),
            ContainerPhase::UnseenKernel { agent, step } => {
                f.write_str(if *agent {
                    "unseen-optimized"
                } else {
                    "unseen-original"
                })?;
                match step {
                    UnseenStep::Whole => Ok(()),
                    UnseenStep::Probe => f.write_str("-probe"),
                    UnseenStep::Config(k) => write!(f, "-{k}"),
                }
            }
        }
    }
}

/// What of an error of an unseen evaluation may be told: our own label of the configuration
/// (index and category), never the harness's words.
pub(crate) fn redact_error(err: &str) -> String {
    let ours = err
        .strip_prefix("unseen configuration ")
        .and_then(|rest| rest.split_once(": ").map(|(head, _)| head));
    match ours {
        Some(head) => format!("unseen configuration {head}: failed"),
        None => "failed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_ones_runs_have_always_used_and_only_unseen_ones_see_hidden() {
        let all = [
            (ContainerPhase::Baseline, "baseline", false),
            (ContainerPhase::Agent, "agent", false),
            (ContainerPhase::Candidate, "candidate", false),
            (ContainerPhase::Unseen, "unseen", true),
            (ContainerPhase::UNSEEN_ORIGINAL, "unseen-original", true),
            (ContainerPhase::UNSEEN_OPTIMIZED, "unseen-optimized", true),
            (
                ContainerPhase::UNSEEN_ORIGINAL.step(UnseenStep::Probe),
                "unseen-original-probe",
                true,
            ),
            (
                ContainerPhase::UNSEEN_OPTIMIZED.step(UnseenStep::Config(3)),
                "unseen-optimized-3",
                true,
            ),
        ];
        for (phase, name, hidden) in all {
            assert_eq!(phase.to_string(), name);
            assert_eq!(phase.sees_hidden(), hidden, "{name}");
        }
        assert_eq!(
            ContainerPhase::Candidate.step(UnseenStep::Probe),
            ContainerPhase::Candidate
        );
    }
}
