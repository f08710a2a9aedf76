//! Generalization to hidden unseen configurations: the quadrant of each task, conditional
//! correctness P(opt correct | orig correct), and the gap
//! Δg = (s̄_seen − s̄_unseen) / s̄_seen over both_pass tasks. Where a result judged each
//! configuration on its own, the quadrants are counted per configuration too, so one
//! configuration the agent's kernel fails is one configuration, not a whole task.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::aggregate::ALL;
use crate::score::{score_task, speedup};
use arena_run::result::TaskResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Quadrant {
    /// Original and optimized both correct on the unseen shapes.
    BothPass,
    /// Original correct, optimized wrong: the optimization does not generalize.
    OptRegression,
    BothFail,
    /// Original wrong, optimized correct.
    OptImprovement,
}

impl Quadrant {
    pub fn of(original_correct: bool, optimized_correct: bool) -> Quadrant {
        match (original_correct, optimized_correct) {
            (true, true) => Quadrant::BothPass,
            (true, false) => Quadrant::OptRegression,
            (false, false) => Quadrant::BothFail,
            (false, true) => Quadrant::OptImprovement,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Quadrant::BothPass => "both_pass",
            Quadrant::OptRegression => "opt_regression",
            Quadrant::BothFail => "both_fail",
            Quadrant::OptImprovement => "opt_improvement",
        }
    }
}

/// One task's generalization outcome in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskGeneralization {
    pub task_id: String,
    pub task_type: String,
    pub repeat: u32,
    pub set_digest: String,
    pub quadrant: Quadrant,
    /// The speedup on the visible shapes (0.0 when not correct there).
    pub seen_speedup: f64,
    /// Optimized vs original on the unseen shapes; `None` unless both were correct and timed.
    pub unseen_speedup: Option<f64>,
    pub failures_by_category: BTreeMap<String, u32>,
    /// Configurations by quadrant (empty where the result has no per-configuration passes).
    pub configurations: BTreeMap<&'static str, usize>,
}

fn no_quadrants() -> BTreeMap<&'static str, usize> {
    [
        Quadrant::BothPass,
        Quadrant::OptRegression,
        Quadrant::BothFail,
        Quadrant::OptImprovement,
    ]
    .iter()
    .map(|q| (q.as_str(), 0))
    .collect()
}

/// P(opt correct | orig correct) from quadrant counts.
fn conditional(q: &BTreeMap<&'static str, usize>) -> Option<f64> {
    let both = q.get("both_pass").copied().unwrap_or(0);
    let denom = both + q.get("opt_regression").copied().unwrap_or(0);
    (denom > 0).then(|| both as f64 / denom as f64)
}

pub fn task_generalization(r: &TaskResult) -> Option<TaskGeneralization> {
    let u = r.unseen.as_ref()?;
    let quadrant = Quadrant::of(u.original.correct(), u.optimized.correct());
    let unseen_speedup = (quadrant == Quadrant::BothPass)
        .then(|| speedup(&u.original.performance, &u.optimized.performance).ok())
        .flatten();
    let mut configurations = BTreeMap::new();
    if !u.original_passed.is_empty() && u.original_passed.len() == u.optimized_passed.len() {
        configurations = no_quadrants();
        for (o, a) in u.original_passed.iter().zip(&u.optimized_passed) {
            *configurations
                .entry(Quadrant::of(*o, *a).as_str())
                .or_default() += 1;
        }
    }
    Some(TaskGeneralization {
        task_id: r.task_id.to_string(),
        task_type: r.task_type.clone(),
        repeat: r.repeat,
        set_digest: u.set_digest.clone(),
        quadrant,
        seen_speedup: score_task(r).speedup,
        unseen_speedup,
        failures_by_category: u.failures_by_category.clone(),
        configurations,
    })
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeneralizationSummary {
    pub task_type: String,
    /// (task, run) pairs with unseen results.
    pub task_runs: usize,
    pub quadrants: BTreeMap<&'static str, usize>,
    /// P(opt correct | orig correct) = both_pass / (both_pass + opt_regression), in 0–1.
    pub conditional_correctness: Option<f64>,
    pub mean_seen_speedup: Option<f64>,
    pub mean_unseen_speedup: Option<f64>,
    /// (s̄_seen − s̄_unseen) / s̄_seen over both_pass tasks with both speedups measured.
    pub delta_g: Option<f64>,
    pub failures_by_category: BTreeMap<String, u32>,
    /// Configurations by quadrant, over the task runs whose results judged each one.
    pub config_quadrants: BTreeMap<&'static str, usize>,
    /// P(opt correct | orig correct) over those configurations.
    pub config_conditional_correctness: Option<f64>,
}

pub fn summarize(label: &str, items: &[&TaskGeneralization]) -> GeneralizationSummary {
    let mut quadrants = no_quadrants();
    let mut config_quadrants = no_quadrants();
    let mut failures = BTreeMap::new();
    for g in items {
        *quadrants.entry(g.quadrant.as_str()).or_default() += 1;
        for (q, n) in &g.configurations {
            *config_quadrants.entry(q).or_default() += n;
        }
        for (cat, n) in &g.failures_by_category {
            *failures.entry(cat.clone()).or_default() += n;
        }
    }
    let pairs: Vec<(f64, f64)> = items
        .iter()
        .filter(|g| g.quadrant == Quadrant::BothPass && g.seen_speedup > 0.0)
        .filter_map(|g| g.unseen_speedup.map(|u| (g.seen_speedup, u)))
        .collect();
    let (seen, unseen) = if pairs.is_empty() {
        (None, None)
    } else {
        let n = pairs.len() as f64;
        (
            Some(pairs.iter().map(|p| p.0).sum::<f64>() / n),
            Some(pairs.iter().map(|p| p.1).sum::<f64>() / n),
        )
    };
    GeneralizationSummary {
        task_type: label.to_string(),
        task_runs: items.len(),
        conditional_correctness: conditional(&quadrants),
        quadrants,
        mean_seen_speedup: seen,
        mean_unseen_speedup: unseen,
        delta_g: seen.zip(unseen).map(|(s, u)| (s - u) / s),
        failures_by_category: failures,
        config_conditional_correctness: conditional(&config_quadrants),
        config_quadrants,
    }
}

/// One summary per task type that has unseen results, then `all`; empty when none has.
pub fn summarize_by_type(results: &[TaskResult]) -> Vec<GeneralizationSummary> {
    let items: Vec<TaskGeneralization> = results.iter().filter_map(task_generalization).collect();
    if items.is_empty() {
        return Vec::new();
    }
    let mut groups: BTreeMap<&str, Vec<&TaskGeneralization>> = BTreeMap::new();
    for g in &items {
        groups.entry(g.task_type.as_str()).or_default().push(g);
    }
    let mut rows: Vec<_> = groups.iter().map(|(t, g)| summarize(t, g)).collect();
    let all: Vec<&TaskGeneralization> = items.iter().collect();
    rows.push(summarize(ALL, &all));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use arena_eval::record::{Evaluation, GateReport, GateStatus, PerfCase};
    use arena_run::result::UnseenResult;

    fn eval(correct: bool, ms: &[(&str, f64)]) -> Evaluation {
        Evaluation::new(
            GateReport::new(GateStatus::Ok, None),
            GateReport::new(
                if correct {
                    GateStatus::Ok
                } else {
                    GateStatus::Fail
                },
                None,
            ),
            ms.iter().map(|(i, m)| PerfCase::new(i, *m)).collect(),
        )
    }

    fn result(id: &str, seen_ms: f64, orig_ok: bool, opt_ok: bool, unseen_ms: f64) -> TaskResult {
        let mut r = TaskResult::new(
            arena_task::TaskId::new(id).unwrap(),
            "t",
            0,
            eval(true, &[("p1", 4.0)]),
            eval(true, &[("p1", seen_ms)]),
        );
        r.unseen = Some(UnseenResult {
            set_digest: "sha256:ab".into(),
            original: eval(orig_ok, &[("u1", 6.0)]),
            optimized: eval(opt_ok, &[("u1", unseen_ms)]),
            failures_by_category: if opt_ok {
                BTreeMap::new()
            } else {
                [("alignment_stress".to_string(), 2)].into()
            },
            original_failures_by_category: BTreeMap::new(),
            original_passed: vec![orig_ok; 4],
            optimized_passed: vec![true, opt_ok, opt_ok, true],
        });
        r
    }

    #[test]
    fn quadrants_conditional_correctness_and_gap() {
        let results = vec![
            // seen 4/1 = 4, unseen 6/3 = 2
            result("a", 1.0, true, true, 3.0),
            // seen 4/2 = 2, unseen 6/6 = 1
            result("b", 2.0, true, true, 6.0),
            result("c", 1.0, true, false, 1.0),
            result("d", 1.0, false, false, 1.0),
            result("e", 1.0, false, true, 1.0),
        ];
        let rows = summarize_by_type(&results);
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!(r.quadrants["both_pass"], 2);
        assert_eq!(r.quadrants["opt_regression"], 1);
        assert_eq!(r.quadrants["both_fail"], 1);
        assert_eq!(r.quadrants["opt_improvement"], 1);
        // 2 / (2 + 1)
        assert!((r.conditional_correctness.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        // s̄_seen = 3, s̄_unseen = 1.5 → Δg = 0.5
        assert_eq!(r.mean_seen_speedup, Some(3.0));
        assert_eq!(r.mean_unseen_speedup, Some(1.5));
        assert_eq!(r.delta_g, Some(0.5));
        assert_eq!(r.failures_by_category["alignment_stress"], 4);
        // Per configuration: a failed task fails two of its four configurations.
        assert_eq!(r.config_quadrants["both_pass"], 4 + 4 + 2);
        assert_eq!(r.config_quadrants["opt_regression"], 2);
        assert_eq!(r.config_quadrants["both_fail"], 2);
        assert_eq!(r.config_quadrants["opt_improvement"], 2 + 4);
        assert!((r.config_conditional_correctness.unwrap() - 10.0 / 12.0).abs() < 1e-12);
    }

    #[test]
    fn results_without_per_configuration_passes_count_no_configurations() {
        let mut r = result("a", 1.0, true, false, 1.0);
        r.unseen.as_mut().unwrap().optimized_passed.clear();
        let rows = summarize_by_type(&[r]);
        assert_eq!(rows[0].quadrants["opt_regression"], 1);
        assert!(rows[0].config_quadrants.values().all(|n| *n == 0));
        assert_eq!(rows[0].config_conditional_correctness, None);
    }

    #[test]
    fn no_unseen_results_no_rows() {
        let mut r = result("a", 1.0, true, true, 1.0);
        r.unseen = None;
        assert!(summarize_by_type(&[r]).is_empty());
    }
}
