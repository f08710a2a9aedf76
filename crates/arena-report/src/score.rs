//! Per-task scoring, exactly as the AgentKernelArena paper defines it:
//! speedup = mean over matched test cases of baseline_ms / candidate_ms, and
//! Score = 20·[compiles] + 100·[correct] + 100·speedup·[correct].
//! Where a case was measured in pairs (the original and the agent's kernel interleaved in one
//! session), its baseline_ms / candidate_ms is the median ratio over its pairs. A time that
//! is zero, negative, not a number, or below the device's floor fails the performance gate
//! with its reason: it never becomes a speedup, nor a 1.0.

use std::collections::BTreeMap;

use serde::Serialize;

use arena_eval::record::{is_measured, PerfCase};
use arena_run::result::TaskResult;

/// Why no speedup could be measured (the performance gate failed).
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum PerfFailure {
    #[error("no performance cases")]
    NoCases,
    #[error("test case `{id}` appears twice in one report")]
    DuplicateCase { id: String },
    #[error("baseline case `{id}` failed (execution_time_ms = {ms})")]
    BaselineCaseFailed { id: String, ms: f64 },
    #[error("case `{id}` failed (execution_time_ms = {ms})")]
    CaseFailed { id: String, ms: f64 },
    #[error("case `{id}` of the baseline is missing from the candidate's report")]
    MissingCase { id: String },
    /// The harness's own times disagree with arena's clock: they are not believed.
    #[error("the reported times failed arena's cross-check: {why}")]
    CrossCheck { why: String },
    /// The performance gate itself failed (a command that exited non-zero, a round never
    /// reached, no report found).
    #[error("the performance gate failed: {why}")]
    Measurement { why: String },
    /// A case faster than any call can be on the device it ran on.
    #[error("case `{id}` reports {ms:e} ms, below the device's floor of {floor_ms:e} ms")]
    BelowFloor { id: String, ms: f64, floor_ms: f64 },
}

fn by_id(cases: &[PerfCase]) -> Result<BTreeMap<&str, f64>, PerfFailure> {
    let mut m = BTreeMap::new();
    for c in cases {
        if m.insert(c.test_case_id.as_str(), c.execution_time_ms)
            .is_some()
        {
            return Err(PerfFailure::DuplicateCase {
                id: c.test_case_id.clone(),
            });
        }
    }
    Ok(m)
}

/// The original kernel's time measured beside the candidate's in the same session (the
/// trusted evaluator's paired batches), where the case has one.
pub fn paired_baseline(c: &PerfCase) -> Option<f64> {
    c.pairing.baseline_ms
}

/// Arithmetic mean over the baseline's cases of baseline_ms / candidate_ms, matched by
/// `test_case_id`. Where the candidate's case carries a paired baseline time (measured in the
/// same session, interleaved), that time is the baseline's. Any failed (≤ 0 ms, or
/// non-finite) or missing case fails the gate.
pub fn speedup(baseline: &[PerfCase], candidate: &[PerfCase]) -> Result<f64, PerfFailure> {
    let mut base = by_id(baseline)?;
    let cand = by_id(candidate)?;
    let cand_cases: BTreeMap<&str, &PerfCase> = candidate
        .iter()
        .map(|c| (c.test_case_id.as_str(), c))
        .collect();
    for c in candidate {
        if let (Some(b), true) = (
            paired_baseline(c),
            base.contains_key(c.test_case_id.as_str()),
        ) {
            base.insert(c.test_case_id.as_str(), b);
        }
    }
    if base.is_empty() {
        return Err(PerfFailure::NoCases);
    }
    let mut sum = 0.0;
    for (id, &b) in &base {
        if !is_measured(b) {
            return Err(PerfFailure::BaselineCaseFailed {
                id: id.to_string(),
                ms: b,
            });
        }
        let c = *cand
            .get(id)
            .ok_or_else(|| PerfFailure::MissingCase { id: id.to_string() })?;
        if !is_measured(c) {
            return Err(PerfFailure::CaseFailed {
                id: id.to_string(),
                ms: c,
            });
        }
        sum += match cand_cases.get(id).and_then(|c| crate::stats::pairs(c)) {
            Some(pairs) => crate::stats::pair_ratio(&pairs),
            None => b / c,
        };
    }
    Ok(sum / base.len() as f64)
}

/// The paper's score from the three gate outcomes.
pub fn score(compiled: bool, correct: bool, speedup: f64) -> f64 {
    let c = if correct { 1.0 } else { 0.0 };
    20.0 * if compiled { 1.0 } else { 0.0 } + 100.0 * c + 100.0 * speedup * c
}

/// One task in one run, scored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskScore {
    pub task_id: String,
    pub task_type: String,
    pub repeat: u32,
    pub compiled: bool,
    pub correct: bool,
    /// 0.0 when not correct or when the performance gate failed.
    pub speedup: f64,
    pub score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub performance_failure: Option<PerfFailure>,
    /// How the result's numbers were measured.
    pub trust: arena_run::result::Trust,
    /// The speedup's 95% interval, where every case has paired samples (a bootstrap for the
    /// trusted evaluator's, the rounds' order statistics for paired self-reported runs);
    /// filled by [`crate::Report::build`] (resampling is not free).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup_interval: Option<(f64, f64)>,
    /// The speedup as AgentKernelArena measures it, for comparison with the paper's numbers:
    /// one sample of each kernel, in different sessions (the baseline evaluation's times over
    /// the candidate's first paired sample). Where cases were paired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpaired_speedup: Option<f64>,
    /// The speedup over the original compiled by torch.compile, timed in the same pairs
    /// ([`compiled_speedup`]): KernelBench's second column. Where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiled_speedup: Option<f64>,
    /// Whether the task has a compiled baseline (its harness declares one), measured or not:
    /// such tasks make the aggregates' torch.compile columns, a run without the speedup
    /// counting as not faster.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub vs_compiled: bool,
    /// Each kernel whose Triton autotuner chose differently from one performance run to the
    /// next ([`arena_eval::autotune`]): its rounds spread with the choice as well as the
    /// kernel, which a reader of the interval should know.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub autotune_varied: Vec<String>,
}

/// The first case with a time below the evaluation's device floor, where one was measured:
/// its reported time or any of its paired samples (the score takes the median of the pairs'
/// ratios, so every sample must be a possible time).
fn below_floor(e: &arena_eval::record::Evaluation) -> Option<PerfFailure> {
    let floor = e.device_floor_ms?;
    e.performance.iter().find_map(|c| {
        let samples = crate::stats::pairs(c).unwrap_or_default();
        std::iter::once(c.execution_time_ms)
            .chain(samples.iter().map(|p| p.1))
            .find(|ms| *ms > 0.0 && *ms < floor)
            .filter(|_| c.measured())
            .map(|ms| PerfFailure::BelowFloor {
                id: c.test_case_id.clone(),
                ms,
                floor_ms: floor,
            })
    })
}

/// The speedup over the original compiled by torch.compile (KernelBench's second column):
/// the mean over the candidate's cases of the median ratio of its `compiled_pairs_ms`, timed
/// in the same pairs as the eager original. `None` unless every case has them.
pub fn compiled_speedup(candidate: &[PerfCase]) -> Option<f64> {
    if candidate.is_empty() {
        return None;
    }
    let ratios: Vec<f64> = candidate
        .iter()
        .map(|c| {
            let pairs = crate::stats::times_of(c.pairing.compiled_pairs_ms.as_deref()?)?;
            Some(crate::stats::pair_ratio(&pairs))
        })
        .collect::<Option<_>>()?;
    Some(ratios.iter().sum::<f64>() / ratios.len() as f64)
}

/// Whether the candidate's evaluation had a compiled baseline to be timed against (the task's
/// harness declares one): its evaluator's record says so, measured or not.
fn has_compiled_baseline(r: &TaskResult) -> bool {
    r.evaluators
        .get("candidate")
        .is_some_and(|e| e.compiled_baseline.is_some())
}

/// AgentKernelArena's single-sample speedup of paired cases ([`TaskScore::unpaired_speedup`]).
pub fn unpaired_speedup(baseline: &[PerfCase], candidate: &[PerfCase]) -> Option<f64> {
    let firsts: Vec<PerfCase> = candidate
        .iter()
        .map(|c| {
            let first = crate::stats::pairs(c)?.first()?.1;
            Some(PerfCase::new(&c.test_case_id, first))
        })
        .collect::<Option<_>>()?;
    let plain: Vec<PerfCase> = baseline
        .iter()
        .map(|c| PerfCase::new(&c.test_case_id, c.execution_time_ms))
        .collect();
    speedup(&plain, &firsts).ok()
}

pub fn score_task(r: &TaskResult) -> TaskScore {
    let compiled = r.candidate.compiled();
    let correct = r.candidate.correct();
    let refused = r
        .cross_check
        .as_ref()
        .filter(|c| c.verdict == arena_eval::cross_check::Verdict::Inconsistent);
    let (speedup, performance_failure) = if let (true, Some(c)) = (correct, refused) {
        (
            0.0,
            Some(PerfFailure::CrossCheck {
                why: c.reason.clone(),
            }),
        )
    } else if let (true, Some(why)) = (correct, &r.candidate.performance_error) {
        (0.0, Some(PerfFailure::Measurement { why: why.clone() }))
    } else if let (true, Some(f)) = (correct, below_floor(&r.candidate)) {
        (0.0, Some(f))
    } else if correct {
        match speedup(&r.baseline.performance, &r.candidate.performance) {
            Ok(s) => (s, None),
            Err(f) => (0.0, Some(f)),
        }
    } else {
        (0.0, None)
    };
    TaskScore {
        task_id: r.task_id.to_string(),
        task_type: r.task_type.clone(),
        repeat: r.repeat,
        compiled,
        correct,
        speedup,
        score: score(compiled, correct, speedup),
        speedup_interval: None,
        unpaired_speedup: (speedup > 0.0)
            .then(|| unpaired_speedup(&r.baseline.performance, &r.candidate.performance))
            .flatten(),
        compiled_speedup: (speedup > 0.0)
            .then(|| compiled_speedup(&r.candidate.performance))
            .flatten(),
        vs_compiled: has_compiled_baseline(r),
        autotune_varied: r
            .candidate
            .autotuning
            .as_ref()
            .map(|a| a.varied.clone())
            .unwrap_or_default(),
        performance_failure,
        trust: r.trust,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases(v: &[(&str, f64)]) -> Vec<PerfCase> {
        v.iter().map(|(id, ms)| PerfCase::new(id, *ms)).collect()
    }

    #[test]
    fn paper_points() {
        assert_eq!(score(false, false, 0.0), 0.0);
        assert_eq!(score(true, false, 0.0), 20.0);
        assert_eq!(score(true, true, 1.0), 220.0);
        assert_eq!(score(true, true, 3.0), 420.0);
        // Speedup only counts when correct.
        assert_eq!(score(true, false, 5.0), 20.0);
    }

    #[test]
    fn speedup_is_mean_of_ratios_matched_by_id() {
        let base = cases(&[("perf1", 2.0), ("perf2", 9.0)]);
        // Candidate listed in another order: 2/1 = 2 and 9/3 = 3, mean 2.5.
        let cand = cases(&[("perf2", 3.0), ("perf1", 1.0)]);
        assert_eq!(speedup(&base, &cand).unwrap(), 2.5);
        // Not the ratio of means (11/4 = 2.75).
        assert_ne!(speedup(&base, &cand).unwrap(), 2.75);
    }

    #[test]
    fn failed_or_missing_cases_fail_the_gate() {
        let base = cases(&[("a", 1.0), ("b", 1.0)]);
        assert_eq!(
            speedup(&base, &cases(&[("a", 1.0), ("b", -1.0)])),
            Err(PerfFailure::CaseFailed {
                id: "b".into(),
                ms: -1.0
            })
        );
        assert_eq!(
            speedup(&base, &cases(&[("a", 1.0), ("b", 0.0)])),
            Err(PerfFailure::CaseFailed {
                id: "b".into(),
                ms: 0.0
            })
        );
        assert_eq!(
            speedup(&base, &cases(&[("a", 1.0)])),
            Err(PerfFailure::MissingCase { id: "b".into() })
        );
        assert_eq!(
            speedup(&cases(&[("a", -1.0)]), &cases(&[("a", 1.0)])),
            Err(PerfFailure::BaselineCaseFailed {
                id: "a".into(),
                ms: -1.0
            })
        );
        assert_eq!(speedup(&[], &[]), Err(PerfFailure::NoCases));
        assert_eq!(
            speedup(&cases(&[("a", 1.0), ("a", 2.0)]), &cases(&[("a", 1.0)])),
            Err(PerfFailure::DuplicateCase { id: "a".into() })
        );
        // A paired baseline time replaces the baseline evaluation's.
        let mut paired = cases(&[("a", 2.0)]);
        paired[0].pairing.baseline_ms = Some(6.0);
        assert_eq!(speedup(&cases(&[("a", 4.0)]), &paired), Ok(3.0));
        let mut zero = cases(&[("a", 2.0)]);
        zero[0].pairing.baseline_ms = Some(0.0);
        assert!(matches!(
            speedup(&cases(&[("a", 4.0)]), &zero),
            Err(PerfFailure::BaselineCaseFailed { .. })
        ));
        // Extra candidate cases are ignored: the baseline defines the test set.
        assert_eq!(
            speedup(&cases(&[("a", 4.0)]), &cases(&[("a", 2.0), ("z", 1.0)])),
            Ok(2.0)
        );
    }

    #[test]
    fn the_speedup_over_the_compiled_original_needs_every_case_paired_with_it() {
        let mut a = paired("a", &[(4.0, 2.0), (4.0, 2.0), (4.0, 2.0)]);
        let mut b = paired("b", &[(3.0, 1.0), (3.0, 1.0)]);
        // Ratios 1.5, 3 and 1: the median is 1.5; case b's is 0.5; the mean 1.0.
        a.pairing.compiled_pairs_ms = Some(vec![[3.0, 2.0], [6.0, 2.0], [2.0, 2.0]]);
        b.pairing.compiled_pairs_ms = Some(vec![[0.5, 1.0], [0.5, 1.0]]);
        assert_eq!(compiled_speedup(&[a.clone(), b.clone()]), Some(1.0));
        // A case where it could not be timed: no column at all, never a partial mean.
        b.pairing.compiled_pairs_ms = None;
        b.pairing.compiled_error = Some("wrong output".into());
        assert_eq!(compiled_speedup(&[a.clone(), b]), None);
        // A time that is not one (a harness's report has these keys dropped; arena's own
        // never writes one, but a zero is not read as infinitely fast).
        a.pairing.compiled_pairs_ms = Some(vec![[0.0, 2.0], [6.0, 2.0]]);
        assert_eq!(compiled_speedup(&[a]), None);
        assert_eq!(compiled_speedup(&[]), None);
    }

    fn paired(id: &str, pairs: &[(f64, f64)]) -> PerfCase {
        let mut c = PerfCase::new(id, pairs[0].1);
        c.pairing.pairs_ms = Some(pairs.iter().map(|(b, c)| [*b, *c]).collect());
        c.pairing.baseline_ms = Some(pairs[0].0);
        c
    }

    #[test]
    fn a_paired_case_counts_its_median_ratio() {
        // Ratios 2, 1.5 and 4: the median is 2, whatever baseline_ms and the baseline
        // evaluation say; a drift moving both kernels of a pair alike cancels.
        let c = paired("a", &[(2.0, 1.0), (3.0, 2.0), (40.0, 10.0)]);
        assert_eq!(
            speedup(&cases(&[("a", 99.0)]), std::slice::from_ref(&c)),
            Ok(2.0)
        );
        // AgentKernelArena's one-sample way: the baseline evaluation over the first sample.
        assert_eq!(unpaired_speedup(&cases(&[("a", 3.0)]), &[c]), Some(3.0));
        assert_eq!(
            unpaired_speedup(&cases(&[("a", 3.0)]), &cases(&[("a", 1.0)])),
            None
        );
    }

    fn result(candidate: arena_eval::record::Evaluation) -> TaskResult {
        let ok = arena_eval::record::GateReport::new(arena_eval::record::GateStatus::Ok, None);
        let baseline = arena_eval::record::Evaluation::new(ok.clone(), ok, cases(&[("a", 1.0)]));
        TaskResult::new(
            arena_task::TaskId::new("t/x").unwrap(),
            "triton2triton",
            0,
            baseline,
            candidate,
        )
    }

    #[test]
    fn a_failed_measurement_or_a_time_below_the_floor_scores_no_speedup_with_its_reason() {
        let ok = arena_eval::record::GateReport::new(arena_eval::record::GateStatus::Ok, None);
        let mut e = arena_eval::record::Evaluation::new(ok.clone(), ok, cases(&[("a", 0.5)]));
        e.performance_error = Some("the agent's kernel, round 2: not reached".into());
        let s = score_task(&result(e.clone()));
        assert_eq!((s.speedup, s.score), (0.0, 120.0));
        assert_eq!(
            s.performance_failure.unwrap().to_string(),
            "the performance gate failed: the agent's kernel, round 2: not reached"
        );
        e.performance_error = None;
        e.device_floor_ms = Some(0.6);
        let s = score_task(&result(e.clone()));
        assert!(matches!(
            s.performance_failure,
            Some(PerfFailure::BelowFloor { ref id, .. }) if id == "a"
        ));
        assert_eq!(s.speedup, 0.0);
        e.device_floor_ms = Some(0.4);
        let s = score_task(&result(e));
        assert_eq!((s.speedup, s.performance_failure), (2.0, None));
        assert_eq!(
            s.unpaired_speedup, None,
            "no pairs, no single-sample column"
        );
    }
}
