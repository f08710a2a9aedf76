//! What each container of a task run is for. Whether a container is given hidden
//! configurations decides how little of it is kept (its logs, its kernels' output, its gate
//! messages): that is a property of the phase, asked of the type, never read off how a name
//! is spelled (a typo in a string prefix would have leaked a hidden configuration).

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
    match label(err) {
        Some((head, _)) => format!("unseen configuration {head}: failed"),
        None => "failed".into(),
    }
}

/// What of an error of arena's evaluator on an unseen configuration may be told: its label
/// and the kind of failure, where the kind is one of the evaluator's words
/// (arena_eval::trusted::HIDDEN_KINDS); else as [`redact_error`]. Nothing a kernel could have
/// written gets through, even from an evaluator that let it.
pub(crate) fn redact_kind(err: &str) -> String {
    let kind = |rest: &str| {
        let k = rest.split(": ").next().unwrap_or(rest);
        arena_eval::trusted::HIDDEN_KINDS
            .iter()
            .find(|w| **w == k)
            .copied()
    };
    match label(err) {
        Some((head, rest)) => match kind(rest) {
            Some(k) => format!("unseen configuration {head}: {k}"),
            None => format!("unseen configuration {head}: failed"),
        },
        None => kind(err).unwrap_or("failed").to_string(),
    }
}

/// `unseen configuration K (category): REST` as (`K (category)`, REST), where the label is
/// ours: an index and a category's name.
fn label(err: &str) -> Option<(&str, &str)> {
    let (head, rest) = err
        .strip_prefix("unseen configuration ")?
        .split_once(": ")?;
    let (index, category) = match head.split_once(' ') {
        Some((i, c)) => (i, Some(c)),
        None => (head, None),
    };
    let ours = !index.is_empty()
        && index.bytes().all(|b| b.is_ascii_digit())
        && category.is_none_or(|c| {
            c.len() > 2
                && c.starts_with('(')
                && c.ends_with(')')
                && c[1..c.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_')
        });
    ours.then_some((head, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel's words in an unseen evaluation's error never get through: only our label and
    /// a kind of the evaluator's.
    #[test]
    fn only_labels_and_kinds_are_told_of_an_unseen_failure() {
        let cases = [
            (
                "unseen configuration 3 (scale_up): kernel_failed",
                "unseen configuration 3 (scale_up): kernel_failed",
            ),
            (
                "unseen configuration 3 (scale_up): tolerance_admits_zeros: the task's own check",
                "unseen configuration 3 (scale_up): tolerance_admits_zeros",
            ),
            (
                "unseen configuration 3 (scale_up): RuntimeError: n=12345",
                "unseen configuration 3 (scale_up): failed",
            ),
            ("unseen configuration 3 (n=12345): kernel_failed", "failed"),
            ("unseen configuration 12345x: wrong_output", "failed"),
            ("LEAK_12345: n=12345", "failed"),
            ("kernel_failed", "kernel_failed"),
        ];
        for (err, told) in cases {
            assert_eq!(redact_kind(err), told, "{err}");
        }
        assert_eq!(
            redact_error("unseen configuration 3 (n=12345): x"),
            "failed"
        );
    }

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
