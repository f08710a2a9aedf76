//! Unseen configurations under arena's trusted evaluator: one container judges each
//! configuration for each kernel on its own, and times both where both pass them all. What
//! comes back names configurations by index only; this turns it into the unseen result.

use std::collections::BTreeMap;
use std::path::Path;

use arena_eval::record::{Evaluation, GateReport, GateStatus, PerfCase};
use arena_eval::sources::StagedSource;
use arena_eval::trusted::{Role, BASELINE, CANDIDATE};
use arena_eval::untrusted::read_text_beneath;
use arena_task::hidden::TaskUnseen;
use serde::Deserialize;

use super::phase::{redact_kind, ContainerPhase};
use super::trusted::TrustedRun;
use super::unseen::KernelOnUnseen;
use super::TaskRun;
use crate::error::{Result, RunnerError};

/// `unseen_report.json`, as the evaluator writes it.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct UnseenReport {
    #[serde(default)]
    pub compiled: BTreeMap<String, bool>,
    #[serde(default)]
    pub passed: BTreeMap<String, Vec<bool>>,
    #[serde(default)]
    pub cases: Vec<PerfCase>,
}

/// The evaluation of the kernel of `role`, from the report.
pub(crate) fn kernel_result(set: &TaskUnseen, rep: &UnseenReport, role: Role) -> KernelOnUnseen {
    let compiled = rep.compiled.get(role.name).copied().unwrap_or(false);
    let reported = rep.passed.get(role.name);
    // One judgement per configuration of the set, whatever length the evaluator wrote.
    let passed: Vec<bool> = (0..set.configs.len())
        .map(|k| compiled && reported.and_then(|p| p.get(k)).copied().unwrap_or(false))
        .collect();
    let bad: Vec<usize> = (0..passed.len()).filter(|k| !passed[*k]).collect();
    let compile = if compiled {
        GateReport::new(GateStatus::Ok, None)
    } else {
        GateReport::new(
            GateStatus::Fail,
            Some("the kernel did not load or run".into()),
        )
    };
    let correctness = if !compiled {
        GateReport::new(GateStatus::Skipped, None)
    } else if bad.is_empty() {
        GateReport::new(GateStatus::Ok, None)
    } else {
        let names: Vec<String> = bad
            .iter()
            .map(|k| format!("{k} ({})", set.configs[*k].category.as_str()))
            .collect();
        GateReport::new(
            GateStatus::Fail,
            Some(format!("fails unseen configurations {}", names.join(", "))),
        )
    };
    let performance = if compiled && bad.is_empty() {
        rep.cases
            .iter()
            .map(|c| {
                let mut c = redacted(c.clone());
                if role == BASELINE {
                    c.execution_time_ms = c.pairing.baseline_ms.unwrap_or(c.execution_time_ms);
                    c.pairing.baseline_ms = None;
                    c.pairing.pairs_ms = None;
                    c.pairing.paired_by = None;
                    c.pairing.pair_sessions = None;
                }
                c
            })
            .collect()
    } else {
        Vec::new()
    };
    KernelOnUnseen::judged(
        Evaluation::new(compile, correctness, performance),
        set,
        passed,
    )
}

/// A case of the evaluator's unseen report as a result keeps it: times, how they were
/// measured, and its errors as our labels and the evaluator's kinds only (redact_kind); the
/// report's other keys are dropped. What a kernel raised or said on a hidden configuration
/// would otherwise carry its shapes and values into every report.
fn redacted(mut c: PerfCase) -> PerfCase {
    c.error = c.error.as_deref().map(redact_kind);
    if let Some(g) = c.measured.graph_error.as_mut() {
        for why in g.values_mut() {
            *why = redact_kind(why);
        }
    }
    c.pairing.compiled_error = c.pairing.compiled_error.as_deref().map(redact_kind);
    c.extra.clear();
    c
}

impl TaskRun<'_> {
    /// The original and (where its sources were taken) the agent's kernel on the set.
    pub(crate) async fn unseen_trusted(
        &self,
        set: &TaskUnseen,
        hidden_file: &Path,
        staged: Option<&[StagedSource]>,
    ) -> Result<(KernelOnUnseen, Option<KernelOnUnseen>)> {
        let roles: &[Role] = if staged.is_some() {
            &[BASELINE, CANDIDATE]
        } else {
            &[BASELINE]
        };
        let t = self
            .trusted(TrustedRun {
                phase: ContainerPhase::Unseen,
                roles,
                candidate: staged,
                hidden: Some(hidden_file),
            })
            .await;
        // The private copy of the hidden file goes at once, whatever happened.
        let _ = std::fs::remove_file(
            self.ctx
                .rundir
                .item_dir(self.item)
                .join("unseen/hidden.json"),
        );
        let t = t?;
        let rep: UnseenReport = read_text_beneath(&t.out, Path::new("unseen_report.json"), 4 << 20)
            .map_err(|why| {
                RunnerError::Other(format!("{}: unseen_report.json: {why}", self.item.label()))
            })
            .and_then(|text| {
                serde_json::from_str(&text).map_err(|e| {
                    RunnerError::Other(format!("{}: unseen_report.json: {e}", self.item.label()))
                })
            })?;
        let original = kernel_result(set, &rep, BASELINE);
        let optimized = staged.map(|_| kernel_result(set, &rep, CANDIDATE));
        Ok((original, optimized))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arena_task::unseen::{Category, UnseenConfig};

    fn set() -> TaskUnseen {
        TaskUnseen {
            schema: "arena.unseen/v1".into(),
            task_id: "t".into(),
            harness: "h.py".into(),
            declaration: "TEST_SHAPES".into(),
            also: Vec::new(),
            configs: [Category::EdgeCase, Category::ScaleUp, Category::ScaleUp]
                .into_iter()
                .enumerate()
                .map(|(k, category)| UnseenConfig {
                    category,
                    entry: format!("({},)", 1000 + k),
                    original_passed: None,
                    breaks_tie: None,
                })
                .collect(),
        }
    }

    #[test]
    fn failures_are_named_by_index_and_category_never_by_shape() {
        let rep: UnseenReport = serde_json::from_str(
            r#"{"compiled": {"baseline": true, "candidate": true},
                "passed": {"baseline": [true, true, true], "candidate": [true, false, false]},
                "cases": []}"#,
        )
        .unwrap();
        let orig = kernel_result(&set(), &rep, BASELINE);
        assert!(orig.evaluation.correct() && orig.failures.is_empty());
        assert_eq!(orig.passed, [true, true, true]);
        let KernelOnUnseen {
            evaluation: opt,
            passed,
            failures: opt_fail,
        } = kernel_result(&set(), &rep, CANDIDATE);
        assert_eq!(passed, [true, false, false]);
        let e = opt.correctness.error.unwrap();
        assert_eq!(e, "fails unseen configurations 1 (scale_up), 2 (scale_up)");
        assert!(!e.contains("1001"));
        assert_eq!(opt_fail, [("scale_up".to_string(), 2)].into());
        assert!(opt.performance.is_empty());
    }

    #[test]
    fn a_kernels_words_never_reach_an_unseen_result() {
        let rep: UnseenReport = serde_json::from_str(
            r#"{"compiled": {"baseline": true, "candidate": true},
                "passed": {"baseline": [true, true, true], "candidate": [true, true, true]},
                "cases": [
                  {"test_case_id": "u0", "execution_time_ms": -1.0,
                   "error": "unseen configuration 0 (edge_case): LEAK_1000: n=1000",
                   "graph_error": {"candidate": "LEAK_1000"}, "params": {"shape": [1000]}},
                  {"test_case_id": "u1", "execution_time_ms": -1.0,
                   "error": "unseen configuration 1 (scale_up): kernel_failed"}]}"#,
        )
        .unwrap();
        let opt = kernel_result(&set(), &rep, CANDIDATE).evaluation;
        let text = serde_json::to_string(&opt).unwrap();
        assert!(!text.contains("1000") && !text.contains("LEAK"), "{text}");
        assert_eq!(
            opt.performance[0].error.as_deref(),
            Some("unseen configuration 0 (edge_case): failed")
        );
        assert_eq!(
            opt.performance[1].error.as_deref(),
            Some("unseen configuration 1 (scale_up): kernel_failed")
        );
    }

    #[test]
    fn times_are_shared_out_where_both_pass() {
        let rep: UnseenReport = serde_json::from_str(
            r#"{"compiled": {"baseline": true, "candidate": true},
                "passed": {"baseline": [true, true, true], "candidate": [true, true, true]},
                "cases": [{"test_case_id": "u0", "execution_time_ms": 1.0, "baseline_ms": 3.0, "pairs_ms": [[3.0, 1.0]]}]}"#,
        )
        .unwrap();
        let orig = kernel_result(&set(), &rep, BASELINE).evaluation;
        let opt = kernel_result(&set(), &rep, CANDIDATE).evaluation;
        assert_eq!(orig.performance[0].execution_time_ms, 3.0);
        assert!(orig.performance[0].pairing.pairs_ms.is_none());
        assert_eq!(opt.performance[0].execution_time_ms, 1.0);
        let missing = UnseenReport::default();
        let none = kernel_result(&set(), &missing, CANDIDATE);
        assert!(!none.evaluation.compiled());
        assert_eq!(none.passed, [false, false, false]);
    }
}
