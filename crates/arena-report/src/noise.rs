//! Noise-aware fast_p, beside the paper's: a task counts as faster than p only when the lower
//! bound of its speedup's 95% interval clears p (the paper's fast₁ counts a mean speedup of
//! 1.001 measured on noise). Cases paired call by call (arena's trusted evaluator) get a
//! bootstrap interval, repeats pooled by averaging each resample over them; cases paired in
//! rounds (paired self-reported runs) or sessions of fresh processes (the trusted evaluator
//! on a CPU) get the distribution-free interval of the rounds' or sessions' speedups, repeats
//! pooled by taking all of them. A task without paired samples has no
//! interval and is never counted as confidently fast.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::aggregate::ALL;
use crate::score::score_task;
use crate::stats::{median_interval, quantile, speedup_resampler, unit_ratios};
use crate::TaskResult;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoiseAware {
    pub task_type: String,
    pub tasks: usize,
    /// Tasks correct in every repeat with paired samples in each.
    pub with_interval: usize,
    /// Shares (0–100) of all tasks whose interval's lower bound is ≥ 1 and ≥ 2.
    pub fast1: f64,
    pub fast2: f64,
    /// Median over tasks with an interval of (upper − lower) / 2 relative to the estimate, in %.
    pub median_half_width_pct: Option<f64>,
}

/// One task run as the noise-aware summary needs it: its speedup and its bootstrap draws
/// (made once per run: [`crate::Report::build`] takes the run's own interval from them too).
#[derive(Debug, Clone)]
pub struct RunDraws<'a> {
    pub task_type: &'a str,
    pub task_id: &'a str,
    pub speedup: f64,
    /// `None` for a failed run or one without paired samples, or measured in rounds.
    pub draws: Option<Vec<f64>>,
    /// Each round's (or session's) speedup, for a run whose pairs were measured so.
    pub rounds: Option<Vec<f64>>,
}

impl<'a> RunDraws<'a> {
    pub fn of(r: &'a TaskResult) -> RunDraws<'a> {
        let speedup = score_task(r).speedup;
        let cases = &r.candidate.performance;
        let rounds = (speedup > 0.0).then(|| unit_ratios(cases)).flatten();
        RunDraws {
            task_type: &r.task_type,
            task_id: r.task_id.as_str(),
            speedup,
            draws: (speedup > 0.0 && rounds.is_none())
                .then(|| speedup_resampler(cases))
                .flatten(),
            rounds,
        }
    }

    /// This run's own 95% interval.
    pub fn interval(&self) -> Option<(f64, f64)> {
        match (&self.rounds, &self.draws) {
            (Some(r), _) => Some(median_interval(r, 0.95)),
            (None, Some(d)) => Some(crate::stats::interval(d)),
            _ => None,
        }
    }
}

/// The 95% interval of a task's speedup averaged over its repeats, and that average; `None`
/// unless every repeat is correct and has paired samples.
pub fn task_interval(repeats: &[&TaskResult]) -> Option<(f64, f64, f64)> {
    let runs: Vec<RunDraws> = repeats.iter().map(|r| RunDraws::of(r)).collect();
    pooled(&runs.iter().collect::<Vec<_>>())
}

fn pooled(repeats: &[&RunDraws]) -> Option<(f64, f64, f64)> {
    let estimate = repeats.iter().map(|r| r.speedup).sum::<f64>() / repeats.len() as f64;
    if let Some(rounds) = repeats
        .iter()
        .map(|r| r.rounds.as_deref())
        .collect::<Option<Vec<&[f64]>>>()
    {
        let all: Vec<f64> = rounds.concat();
        let (lo, hi) = median_interval(&all, 0.95);
        return Some((lo, hi, estimate));
    }
    let draws: Vec<&Vec<f64>> = repeats
        .iter()
        .map(|r| r.draws.as_ref())
        .collect::<Option<_>>()?;
    let mut means: Vec<f64> = (0..crate::stats::RESAMPLES)
        .map(|i| draws.iter().map(|d| d[i]).sum::<f64>() / draws.len() as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    Some((quantile(&means, 0.025), quantile(&means, 0.975), estimate))
}

fn summarize(label: &str, tasks: &[Vec<&RunDraws>]) -> NoiseAware {
    let intervals: Vec<(f64, f64, f64)> = tasks.iter().filter_map(|t| pooled(t)).collect();
    let share = |p: f64| {
        if tasks.is_empty() {
            0.0
        } else {
            100.0 * intervals.iter().filter(|(lo, _, _)| *lo >= p).count() as f64
                / tasks.len() as f64
        }
    };
    let mut widths: Vec<f64> = intervals
        .iter()
        .map(|(lo, hi, est)| 100.0 * (hi - lo) / 2.0 / est)
        .collect();
    widths.sort_by(f64::total_cmp);
    NoiseAware {
        task_type: label.to_string(),
        tasks: tasks.len(),
        with_interval: intervals.len(),
        fast1: share(1.0),
        fast2: share(2.0),
        median_half_width_pct: (!widths.is_empty()).then(|| quantile(&widths, 0.5)),
    }
}

/// Per task type (sorted) and `all`.
pub fn noise_aware_by_type(results: &[TaskResult]) -> Vec<NoiseAware> {
    let runs: Vec<RunDraws> = results.iter().map(RunDraws::of).collect();
    summarize_runs(&runs)
}

/// [`noise_aware_by_type`] from runs whose draws are made.
pub fn summarize_runs(runs: &[RunDraws]) -> Vec<NoiseAware> {
    let mut by_task: BTreeMap<(&str, &str), Vec<&RunDraws>> = BTreeMap::new();
    for r in runs {
        by_task.entry((r.task_type, r.task_id)).or_default().push(r);
    }
    let mut by_type: BTreeMap<&str, Vec<Vec<&RunDraws>>> = BTreeMap::new();
    for ((ty, _), rs) in &by_task {
        by_type.entry(ty).or_default().push(rs.clone());
    }
    let mut out: Vec<NoiseAware> = by_type.iter().map(|(ty, ts)| summarize(ty, ts)).collect();
    if !by_task.is_empty() {
        let all: Vec<Vec<&RunDraws>> = by_task.into_values().collect();
        out.push(summarize(ALL, &all));
    }
    out
}

pub fn markdown(rows: &[NoiseAware]) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "| task type | tasks | with interval | fast₁ % (lower bound ≥ 1) | fast₂ % (lower bound ≥ 2) | median ± % |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {:.1} | {} |",
            r.task_type,
            r.tasks,
            r.with_interval,
            r.fast1,
            r.fast2,
            r.median_half_width_pct
                .map_or("–".into(), |w| format!("{w:.1}"))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{self, Spec};

    fn spec(id: &str, rep: u32, s: Option<f64>, noise: f64) -> Spec {
        Spec {
            task_id: id.into(),
            task_type: "t".into(),
            repeat: rep,
            speedup: s,
            noise,
            unseen: false,
        }
    }

    #[test]
    fn a_task_counts_as_fast_only_when_its_interval_clears_the_bar() {
        let rs = vec![
            // Clearly faster: counts for fast1 in both versions.
            fixture::result(&spec("t/x/fast", 0, Some(1.5), 0.02), 1),
            // Barely above 1 in noise: the paper's fast1 counts it, the noise-aware one not.
            fixture::result(&spec("t/x/noise", 0, Some(1.01), 0.2), 2),
            // Failed: neither.
            fixture::result(&spec("t/x/failed", 0, None, 0.02), 3),
        ];
        let n = noise_aware_by_type(&rs);
        let t = &n[0];
        assert_eq!((t.tasks, t.with_interval), (3, 2));
        assert!((t.fast1 - 100.0 / 3.0).abs() < 1e-9, "{t:?}");
        assert_eq!(t.fast2, 0.0);
        assert_eq!(n.last().unwrap().task_type, ALL);
        let (lo, hi, est) = task_interval(&[&rs[1]]).unwrap();
        assert!(
            lo < 1.0 && hi > 1.0 && lo < est && est < hi,
            "{lo} {est} {hi}"
        );
    }

    #[test]
    fn repeats_are_pooled_and_any_failed_repeat_means_no_interval() {
        let a = fixture::result(&spec("t/x/r", 0, Some(2.0), 0.02), 1);
        let b = fixture::result(&spec("t/x/r", 1, Some(2.4), 0.02), 2);
        let (lo, hi, est) = task_interval(&[&a, &b]).unwrap();
        assert!(
            lo > 2.0 && hi < 2.4 && (est - 2.2).abs() < 0.05,
            "{lo} {est} {hi}"
        );
        let failed = fixture::result(&spec("t/x/r", 1, None, 0.02), 2);
        assert!(task_interval(&[&a, &failed]).is_none());
        assert!(markdown(&noise_aware_by_type(&[a, b])).contains("| t | 1 | 1 | 100.0 | 100.0 |"));
    }
}
