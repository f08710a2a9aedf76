//! Aggregates per task type, as the paper defines them. Repeated runs are averaged per task
//! first; σ_r is the population standard deviation of the per-run aggregate mean speedups.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::ReportError;
use crate::score::TaskScore;

/// The row label that aggregates every task type together.
pub const ALL: &str = "all";

/// The thresholds KernelBench's fast_p is reported at (p = 0: correct at all).
pub const FAST_P: &[f64] = &[0.0, 0.5, 0.8, 1.0, 1.5, 2.0];

/// KernelBench's fast_p: the share (0–100) of task runs that are correct and faster than `p`
/// times the baseline (strictly, as KernelBench counts; fast₁ and fast₂ above count ≥, as the
/// AgentKernelArena paper does), averaged per task over its runs first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FastP {
    pub p: f64,
    pub percent: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aggregate {
    pub task_type: String,
    pub tasks: usize,
    pub runs: usize,
    /// Percentages, 0–100.
    pub compile_rate: f64,
    pub correct_rate: f64,
    /// Mean over tasks of the task's mean speedup, failures counted as 0.0.
    pub mean_speedup: f64,
    /// Std of the per-run aggregate mean speedups; `None` with fewer than two runs.
    pub sigma_r: Option<f64>,
    pub mean_score: f64,
    /// Geometric mean over tasks that were correct (with a measured speedup) in some run of
    /// their mean speedup over those runs; `None` when no task qualifies.
    pub geomean_speedup: Option<f64>,
    /// Share (0–100) of all tasks whose mean speedup is ≥ 1 and ≥ 2.
    pub fast1: f64,
    pub fast2: f64,
    /// fast_p at each of `FAST_P`.
    pub fast_p: Vec<FastP>,
    /// Against the original compiled by torch.compile (KernelBench's second baseline), over
    /// the tasks that have one; `None` where none has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_compiled: Option<CompiledColumn>,
    /// Task runs by how their numbers were measured (`trusted`, `self_reported_cross_checked`,
    /// `self_reported`, `unrecorded`): a table that mixes them says so.
    pub measured: BTreeMap<String, usize>,
    /// The share (0–100) of the group's task runs that arena's trusted evaluator measured: a
    /// table over a mixed set says, row by row, how much of it to believe.
    pub trusted_percent: f64,
}

/// The aggregates over the original compiled by torch.compile, over the tasks that have it
/// as a baseline ([`TaskScore::vs_compiled`]). A run without that speedup (not correct, its
/// performance gate failed, or the compiled original could not be timed) counts as not
/// faster, as a failed run counts in fast_p.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledColumn {
    pub tasks: usize,
    /// Geometric mean over tasks with a speedup over the compiled original in some run of
    /// their mean over those runs.
    pub geomean_speedup: Option<f64>,
    /// fast_p at each of `FAST_P`, the compiled original as the baseline.
    pub fast_p: Vec<FastP>,
}

fn compiled_column(by_task: &BTreeMap<&str, Vec<&TaskScore>>) -> Option<CompiledColumn> {
    let tasks: Vec<&Vec<&TaskScore>> = by_task
        .values()
        .filter(|runs| runs.iter().any(|s| s.vs_compiled))
        .collect();
    if tasks.is_empty() {
        return None;
    }
    let logs: Vec<f64> = tasks
        .iter()
        .filter_map(|runs| {
            let got: Vec<f64> = runs.iter().filter_map(|s| s.compiled_speedup).collect();
            (!got.is_empty()).then(|| mean(got).ln())
        })
        .collect();
    let n = tasks.len() as f64;
    Some(CompiledColumn {
        tasks: tasks.len(),
        geomean_speedup: (!logs.is_empty()).then(|| mean(logs.iter().copied()).exp()),
        fast_p: FAST_P
            .iter()
            .map(|&p| FastP {
                p,
                percent: 100.0
                    * tasks
                        .iter()
                        .map(|runs| {
                            mean(runs.iter().map(|s| {
                                frac(s.correct && s.compiled_speedup.is_some_and(|x| x > p))
                            }))
                        })
                        .sum::<f64>()
                    / n,
            })
            .collect(),
    })
}

pub(crate) fn mean(xs: impl IntoIterator<Item = f64>) -> f64 {
    let (s, n) = xs
        .into_iter()
        .fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

pub(crate) fn pop_std(xs: &[f64]) -> f64 {
    let m = mean(xs.iter().copied());
    mean(xs.iter().map(|x| (x - m) * (x - m))).sqrt()
}

fn frac(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// Checks that no (task, repeat) is counted twice.
pub fn check_unique(scores: &[TaskScore]) -> Result<(), ReportError> {
    let mut seen = BTreeSet::new();
    for s in scores {
        if !seen.insert((s.task_id.as_str(), s.repeat)) {
            return Err(ReportError::Duplicate {
                task_id: s.task_id.clone(),
                repeat: s.repeat,
            });
        }
    }
    Ok(())
}

fn trust_key(t: arena_run::result::Trust) -> String {
    serde_json::to_value(t)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The share (0–100) of task runs measured by the trusted evaluator (0 for none).
pub fn trusted_percent(scores: &[&TaskScore]) -> f64 {
    if scores.is_empty() {
        return 0.0;
    }
    let trusted = scores
        .iter()
        .filter(|s| s.trust == arena_run::result::Trust::Trusted)
        .count();
    100.0 * trusted as f64 / scores.len() as f64
}

/// One aggregate over a group of scores (any mix of tasks and repeats).
pub fn aggregate(label: &str, scores: &[&TaskScore]) -> Aggregate {
    let mut by_task: BTreeMap<&str, Vec<&TaskScore>> = BTreeMap::new();
    let mut by_run: BTreeMap<u32, Vec<&TaskScore>> = BTreeMap::new();
    for s in scores {
        by_task.entry(s.task_id.as_str()).or_default().push(s);
        by_run.entry(s.repeat).or_default().push(s);
    }
    struct PerTask {
        compiled: f64,
        correct: f64,
        speedup: f64,
        score: f64,
        correct_speedup: Option<f64>,
        /// Per threshold of FAST_P: the share of runs correct and faster than it.
        fast: Vec<f64>,
    }
    let per_task: Vec<PerTask> = by_task
        .values()
        .map(|runs| {
            let good: Vec<f64> = runs
                .iter()
                .filter(|s| s.correct && s.speedup > 0.0)
                .map(|s| s.speedup)
                .collect();
            PerTask {
                compiled: mean(runs.iter().map(|s| frac(s.compiled))),
                correct: mean(runs.iter().map(|s| frac(s.correct))),
                speedup: mean(runs.iter().map(|s| s.speedup)),
                score: mean(runs.iter().map(|s| s.score)),
                correct_speedup: (!good.is_empty()).then(|| mean(good.iter().copied())),
                fast: FAST_P
                    .iter()
                    .map(|&p| mean(runs.iter().map(|s| frac(s.correct && s.speedup > p))))
                    .collect(),
            }
        })
        .collect();
    let run_means: Vec<f64> = by_run
        .values()
        .map(|run| mean(run.iter().map(|s| s.speedup)))
        .collect();
    let logs: Vec<f64> = per_task
        .iter()
        .filter_map(|t| t.correct_speedup.map(f64::ln))
        .collect();
    let n = per_task.len().max(1) as f64;
    Aggregate {
        task_type: label.to_string(),
        tasks: per_task.len(),
        runs: by_run.len(),
        compile_rate: 100.0 * mean(per_task.iter().map(|t| t.compiled)),
        correct_rate: 100.0 * mean(per_task.iter().map(|t| t.correct)),
        mean_speedup: mean(per_task.iter().map(|t| t.speedup)),
        sigma_r: (run_means.len() >= 2).then(|| pop_std(&run_means)),
        mean_score: mean(per_task.iter().map(|t| t.score)),
        geomean_speedup: (!logs.is_empty()).then(|| mean(logs.iter().copied()).exp()),
        fast1: 100.0 * per_task.iter().filter(|t| t.speedup >= 1.0).count() as f64 / n,
        fast2: 100.0 * per_task.iter().filter(|t| t.speedup >= 2.0).count() as f64 / n,
        fast_p: FAST_P
            .iter()
            .enumerate()
            .map(|(k, &p)| FastP {
                p,
                // A fold from +0.0: `sum` of no f64 is -0.0, printed as "-0.0".
                percent: 100.0 * per_task.iter().map(|t| t.fast[k]).fold(0.0, |a, b| a + b) / n,
            })
            .collect(),
        vs_compiled: compiled_column(&by_task),
        measured: scores.iter().fold(BTreeMap::new(), |mut m, s| {
            *m.entry(trust_key(s.trust)).or_default() += 1;
            m
        }),
        trusted_percent: trusted_percent(scores),
    }
}

/// One row per task type (sorted), then the `all` row.
pub fn aggregate_by_type(scores: &[TaskScore]) -> Result<Vec<Aggregate>, ReportError> {
    check_unique(scores)?;
    let mut groups: BTreeMap<&str, Vec<&TaskScore>> = BTreeMap::new();
    for s in scores {
        groups.entry(s.task_type.as_str()).or_default().push(s);
    }
    let mut rows: Vec<Aggregate> = groups.iter().map(|(t, g)| aggregate(t, g)).collect();
    let all: Vec<&TaskScore> = scores.iter().collect();
    rows.push(aggregate(ALL, &all));
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(task: &str, ty: &str, repeat: u32, compiled: bool, correct: bool, sp: f64) -> TaskScore {
        TaskScore {
            task_id: task.into(),
            task_type: ty.into(),
            repeat,
            compiled,
            correct,
            speedup: if correct { sp } else { 0.0 },
            score: crate::score::score(compiled, correct, if correct { sp } else { 0.0 }),
            performance_failure: None,
            trust: if repeat == 0 {
                arena_run::result::Trust::Trusted
            } else {
                arena_run::result::Trust::SelfReported
            },
            speedup_interval: None,
            unpaired_speedup: None,
            compiled_speedup: None,
            vs_compiled: false,
            autotune_varied: vec![],
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn single_run_hand_computed() {
        // Four tasks: 2× faster, 1× (equal), correct-but-0.5×, and one that only compiles.
        let scores = vec![
            s("a", "t", 0, true, true, 2.0),
            s("b", "t", 0, true, true, 1.0),
            s("c", "t", 0, true, true, 0.5),
            s("d", "t", 0, true, false, 0.0),
        ];
        let rows = aggregate_by_type(&scores).unwrap();
        let r = &rows[0];
        assert_eq!(r.task_type, "t");
        assert_eq!(rows[1].task_type, ALL);
        assert_eq!(r.tasks, 4);
        assert_eq!(r.runs, 1);
        assert!(close(r.compile_rate, 100.0));
        assert!(close(r.correct_rate, 75.0));
        // (2 + 1 + 0.5 + 0) / 4
        assert!(close(r.mean_speedup, 0.875));
        assert_eq!(r.sigma_r, None);
        // (320 + 220 + 170 + 20) / 4
        assert!(close(r.mean_score, 182.5));
        // (2 · 1 · 0.5)^(1/3) = 1
        assert!(close(r.geomean_speedup.unwrap(), 1.0));
        assert!(close(r.fast1, 50.0));
        assert!(close(r.fast2, 25.0));
        // KernelBench's fast_p counts correct and strictly faster: p = 0 is the 3 correct,
        // p = 1 only the 2× one (the 1× one is not faster), p = 2 none.
        let fast: Vec<(f64, f64)> = r.fast_p.iter().map(|f| (f.p, f.percent)).collect();
        assert_eq!(
            fast,
            vec![
                (0.0, 75.0),
                (0.5, 50.0),
                (0.8, 50.0),
                (1.0, 25.0),
                (1.5, 25.0),
                (2.0, 0.0)
            ]
        );
    }

    #[test]
    fn three_runs_sigma_r() {
        // Two tasks over three runs. Per-run means: run0 (1+3)/2 = 2, run1 (2+2)/2 = 2,
        // run2 (0+1.5)/2 = 0.75 (task x failed correctness in run 2).
        // σ_r = population std of [2, 2, 0.75]: mean 1.58333…,
        // deviations² 0.173611, 0.173611, 0.694444 → mean 0.347222 → σ = 0.589256.
        let scores = vec![
            s("x", "t", 0, true, true, 1.0),
            s("y", "t", 0, true, true, 3.0),
            s("x", "t", 1, true, true, 2.0),
            s("y", "t", 1, true, true, 2.0),
            s("x", "t", 2, true, false, 0.0),
            s("y", "t", 2, true, true, 1.5),
        ];
        let r = &aggregate_by_type(&scores).unwrap()[0];
        assert_eq!(r.runs, 3);
        assert!(
            close(r.sigma_r.unwrap(), 0.347_222_222_222_222_2_f64.sqrt()),
            "{:?}",
            r.sigma_r
        );
        // Runs averaged per task first: x = 1, y = 6.5/3 = 2.1667; mean = 1.58333.
        assert!(close(r.mean_speedup, (1.0 + 6.5 / 3.0) / 2.0));
        // x correct 2 of 3 runs, y 3 of 3 → (2/3 + 1)/2.
        assert!(close(r.correct_rate, 100.0 * (2.0 / 3.0 + 1.0) / 2.0));
        // Geomean over correct runs' speedups per task: x = 1.5, y = 6.5/3.
        assert!(close(
            r.geomean_speedup.unwrap(),
            (1.5 * 6.5 / 3.0_f64).sqrt()
        ));
        // fast₁ uses the averaged speedup (failures 0): x 1.0 ≥ 1, y ≥ 1; fast₂: only y.
        assert!(close(r.fast1, 100.0));
        assert!(close(r.fast2, 50.0));
        // fast_p per run first: at p = 1.5, x is faster in run 1 (2.0) of 3, y in runs 0 and 1
        // (3.0, 2.0) of 3 → (1/3 + 2/3) / 2 = 50 %; at p = 0, x 2/3, y 3/3.
        let at = |p: f64| r.fast_p.iter().find(|f| f.p == p).unwrap().percent;
        assert!(close(at(1.5), 50.0), "{:?}", r.fast_p);
        assert!(
            close(at(0.0), 100.0 * (2.0 / 3.0 + 1.0) / 2.0),
            "{:?}",
            r.fast_p
        );
        // Run 0's results are trusted, the others self-reported (the helper's choice): the
        // row counts task runs by how they were measured.
        let want: BTreeMap<String, usize> = [("self_reported".into(), 4), ("trusted".into(), 2)]
            .into_iter()
            .collect();
        assert_eq!(r.measured, want);
    }

    #[test]
    fn groups_by_type_and_all() {
        let scores = vec![
            s("a", "python2python", 0, true, true, 2.0),
            s("b", "triton2triton", 0, false, false, 0.0),
        ];
        let rows = aggregate_by_type(&scores).unwrap();
        let names: Vec<_> = rows.iter().map(|r| r.task_type.as_str()).collect();
        assert_eq!(names, ["python2python", "triton2triton", ALL]);
        assert!(close(rows[1].mean_score, 0.0));
        assert_eq!(rows[1].geomean_speedup, None);
        assert!(close(rows[2].compile_rate, 50.0));
        assert!(close(rows[2].mean_score, 160.0));
    }

    #[test]
    fn the_compiled_column_counts_its_tasks_only_and_failed_runs_as_slower() {
        let mut a = s("a", "kernelbench", 0, true, true, 3.0);
        a.vs_compiled = true;
        a.compiled_speedup = Some(2.0);
        let mut a1 = s("a", "kernelbench", 1, true, true, 3.0);
        a1.vs_compiled = true;
        a1.compiled_speedup = Some(0.5);
        // Correct, but the compiled original could not be timed: not faster than it.
        let mut b = s("b", "kernelbench", 0, true, true, 1.2);
        b.vs_compiled = true;
        let mut b1 = s("b", "kernelbench", 1, true, false, 0.0);
        b1.vs_compiled = true;
        // A task without a compiled baseline is not in the column.
        let c = s("c", "triton2triton", 0, true, true, 5.0);
        let rows = aggregate_by_type(&[a, a1, b, b1, c]).unwrap();
        let kb = rows[0].vs_compiled.as_ref().unwrap();
        assert_eq!(kb.tasks, 2);
        // Only a has a speedup over it: its mean over runs, 1.25.
        assert!(close(kb.geomean_speedup.unwrap(), 1.25));
        let at = |p: f64| kb.fast_p.iter().find(|f| f.p == p).unwrap().percent;
        // p = 0: a in both runs, b in neither (no speedup measured) → (1 + 0) / 2.
        assert!(close(at(0.0), 50.0));
        // p = 1: a in run 0 only → (0.5 + 0) / 2.
        assert!(close(at(1.0), 25.0));
        assert!(close(at(2.0), 0.0));
        assert_eq!(rows[1].vs_compiled, None, "triton2triton has none");
        assert_eq!(rows[2].vs_compiled.as_ref().unwrap().tasks, 2, "all");
    }

    #[test]
    fn duplicates_are_refused() {
        let scores = vec![
            s("a", "t", 0, true, true, 1.0),
            s("a", "t", 0, true, true, 1.0),
        ];
        let e = aggregate_by_type(&scores).unwrap_err().to_string();
        assert_eq!(e, "task `a` run 0 appears more than once in the results");
    }
}
