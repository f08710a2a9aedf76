//! `arenactl compare RUN_A RUN_B`: the same tasks in two runs, paired. Per task, the mean
//! speedup over its repeats (a failed run counts 0); over the tasks correct in both runs, the
//! log-speedup differences are tested with the Wilcoxon signed-rank test and their mean (the
//! geometric-mean ratio B / A) gets a bootstrap interval. Gate flips are listed by name.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::aggregate::{mean, pop_std};
use crate::score::{score_task, TaskScore};
use crate::stats::{mean_interval, wilcoxon, Wilcoxon};
use crate::TaskResult;

/// Below this p-value a difference is called significant.
pub const ALPHA: f64 = 0.05;

/// One task in one run: its repeats summarized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub runs: usize,
    pub correct_runs: usize,
    /// Mean over repeats of the speedup (0 for a repeat that failed).
    pub mean_speedup: f64,
    /// Population σ of the speedups over repeats; `None` for one repeat.
    pub sigma: Option<f64>,
}

impl Side {
    fn of(scores: &[&TaskScore]) -> Side {
        let s: Vec<f64> = scores.iter().map(|t| t.speedup).collect();
        Side {
            runs: s.len(),
            correct_runs: scores.iter().filter(|t| t.correct).count(),
            mean_speedup: mean(s.iter().copied()),
            sigma: (s.len() > 1).then(|| pop_std(&s)),
        }
    }

    /// Correct in every repeat.
    pub fn passed(&self) -> bool {
        self.correct_runs == self.runs
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskDiff {
    pub task_id: String,
    pub a: Side,
    pub b: Side,
    /// B's mean speedup over A's, where both are above zero.
    pub ratio: Option<f64>,
    /// `fixed` (failed in A, correct in B), `regressed` (the reverse), or none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flip: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub tasks: Vec<TaskDiff>,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// Tasks with a speedup in both runs: the ones the test uses.
    pub paired: usize,
    /// exp(mean of ln(s_B / s_A)) over the paired tasks, and its 95% bootstrap interval.
    pub geomean_ratio: Option<f64>,
    pub geomean_ratio_interval: Option<(f64, f64)>,
    pub wilcoxon: Option<Wilcoxon>,
    pub verdict: String,
}

fn by_task(results: &[TaskResult]) -> BTreeMap<String, Vec<TaskScore>> {
    let mut m: BTreeMap<String, Vec<TaskScore>> = BTreeMap::new();
    for r in results {
        m.entry(r.task_id.to_string())
            .or_default()
            .push(score_task(r));
    }
    m
}

pub fn compare(a_name: &str, a: &[TaskResult], b_name: &str, b: &[TaskResult]) -> Comparison {
    let (ta, tb) = (by_task(a), by_task(b));
    let mut tasks = Vec::new();
    let mut logs = Vec::new();
    for (id, sa) in &ta {
        let Some(sb) = tb.get(id) else { continue };
        let side_a = Side::of(&sa.iter().collect::<Vec<_>>());
        let side_b = Side::of(&sb.iter().collect::<Vec<_>>());
        let ratio = (side_a.mean_speedup > 0.0 && side_b.mean_speedup > 0.0)
            .then(|| side_b.mean_speedup / side_a.mean_speedup);
        if let Some(r) = ratio {
            logs.push(r.ln());
        }
        let flip = match (side_a.passed(), side_b.passed()) {
            (false, true) => Some("fixed"),
            (true, false) => Some("regressed"),
            _ => None,
        };
        tasks.push(TaskDiff {
            task_id: id.clone(),
            a: side_a,
            b: side_b,
            ratio,
            flip,
        });
    }
    let only = |x: &BTreeMap<String, Vec<TaskScore>>, y: &BTreeMap<String, Vec<TaskScore>>| {
        x.keys().filter(|k| !y.contains_key(*k)).cloned().collect()
    };
    let geomean_ratio =
        (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp());
    let geomean_ratio_interval = mean_interval(&logs).map(|(lo, hi)| (lo.exp(), hi.exp()));
    let wilcoxon = wilcoxon(&logs);
    let mut c = Comparison {
        a: a_name.to_string(),
        b: b_name.to_string(),
        only_in_a: only(&ta, &tb),
        only_in_b: only(&tb, &ta),
        paired: logs.len(),
        tasks,
        geomean_ratio,
        geomean_ratio_interval,
        wilcoxon,
        verdict: String::new(),
    };
    c.verdict = verdict(&c);
    c
}

fn verdict(c: &Comparison) -> String {
    let flips = |kind: &str| c.tasks.iter().filter(|t| t.flip == Some(kind)).count();
    let gates = format!(
        "; gates: {} fixed, {} regressed",
        flips("fixed"),
        flips("regressed")
    );
    let (Some(w), Some(g)) = (&c.wilcoxon, c.geomean_ratio) else {
        return format!(
            "no verdict on speed: {} task(s) have a speedup in both runs{gates}",
            c.paired
        );
    };
    let interval = c
        .geomean_ratio_interval
        .map(|(lo, hi)| format!(" (95% CI {lo:.3}–{hi:.3})"))
        .unwrap_or_default();
    let p = if w.p_value < 1e-4 {
        format!("{:.1e}", w.p_value)
    } else {
        format!("{:.4}", w.p_value)
    };
    let stats = format!(
        "B/A geometric-mean speedup ratio {g:.3}{interval}, Wilcoxon signed-rank p = {p} ({}, {} task(s))",
        w.method, w.n
    );
    let head = if w.p_value < ALPHA && g > 1.0 {
        format!("{} is faster than {}", c.b, c.a)
    } else if w.p_value < ALPHA && g < 1.0 {
        format!("{} is slower than {}", c.b, c.a)
    } else {
        format!(
            "no significant difference in speed between {} and {} at α = {ALPHA}",
            c.a, c.b
        )
    };
    format!("{head}: {stats}{gates}")
}

fn side_cell(s: &Side) -> String {
    let sigma = s.sigma.map(|x| format!(" ± {x:.3}")).unwrap_or_default();
    format!(
        "{:.3}{sigma} ({}/{} correct)",
        s.mean_speedup, s.correct_runs, s.runs
    )
}

impl Comparison {
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "A = {}\nB = {}\n\n| task | A speedup | B speedup | B / A | gates |\n|---|---:|---:|---:|---|\n",
            self.a, self.b
        );
        for t in &self.tasks {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                t.task_id,
                side_cell(&t.a),
                side_cell(&t.b),
                t.ratio.map_or("–".into(), |r| format!("{r:.3}")),
                t.flip.unwrap_or("")
            );
        }
        for (name, list) in [("A", &self.only_in_a), ("B", &self.only_in_b)] {
            if !list.is_empty() {
                let _ = writeln!(out, "\nOnly in {name}: {}", list.join(", "));
            }
        }
        let _ = writeln!(out, "\n{}", self.verdict);
        out
    }
}

#[cfg(test)]
mod tests;
