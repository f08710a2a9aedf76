//! Where a task run's time went, by whose work it was: the gates' commands (the harness's, or
//! arena's trusted evaluator's gates), the agent, and arena's own — verifying the image,
//! creating, starting and removing containers, and everything in between (staging, each gate
//! runner's set-up, cleaning between steps, results). The unseen evaluations are left out
//! (`unseen_s` has them).

use std::collections::BTreeMap;

use arena_eval::evaluator_record::EvaluatorRecord;
use arena_run::result::{Breakdown, ContainerRecord, Timings};

/// The gate a step of a gate runner's record belongs to.
fn gate_of(step: &str) -> Option<&'static str> {
    if step == "compile" || step.ends_with("-compile") {
        Some("compile")
    } else if step == "correctness" || step.starts_with("probe") {
        Some("correctness")
    } else if step == "performance" || step.starts_with("perf") {
        Some("performance")
    } else {
        None
    }
}

/// Seconds a trusted evaluator's record spent outside its gates (`phases_s`).
fn setup_seconds(record: &EvaluatorRecord) -> f64 {
    record.phases_s.as_ref().map_or(0.0, |p| p.values().sum())
}

/// Seconds per gate in one evaluator's record: a gate runner's command wall times, or the
/// trusted evaluator's gate times.
fn gate_seconds(record: &EvaluatorRecord, into: &mut BTreeMap<&'static str, f64>) {
    for c in record.commands.iter().flatten() {
        if let (Some(g), Some(w)) = (gate_of(&c.step), c.wall_s) {
            *into.entry(g).or_default() += w;
        }
    }
    for (name, s) in record.gate_s.iter().flatten() {
        if let Some(g) = gate_of(name) {
            *into.entry(g).or_default() += s;
        }
    }
}

pub(crate) fn breakdown(
    t: &Timings,
    containers: &BTreeMap<String, ContainerRecord>,
    evaluators: &BTreeMap<String, EvaluatorRecord>,
) -> Breakdown {
    let mut gates = BTreeMap::new();
    let mut evaluator_setup_s = 0.0;
    let mut performance_parts_s = BTreeMap::new();
    let mut performance_measured_s = None;
    for r in evaluators.values() {
        gate_seconds(r, &mut gates);
        evaluator_setup_s += setup_seconds(r);
        for (part, s) in r.performance_parts_s.iter().flatten() {
            *performance_parts_s.entry(part.clone()).or_default() += s;
        }
        if let Some(m) = r.performance_measured_s {
            *performance_measured_s.get_or_insert(0.0) += m;
        }
    }
    let image_s = t.image_s.unwrap_or(0.0);
    let containers_s: f64 = containers
        .values()
        .map(|c| c.create_s + c.start_s + c.teardown_s)
        .sum();
    let agent_s = containers.get("agent").map(|c| c.run_s).unwrap_or(0.0);
    let g = |k| gates.get(k).copied().unwrap_or(0.0);
    let (compile_s, correctness_s, performance_s) =
        (g("compile"), g("correctness"), g("performance"));
    let seen = t.total_s - t.unseen_s.unwrap_or(0.0);
    let gates_s = compile_s + correctness_s + performance_s;
    let other_s = (seen - image_s - containers_s - agent_s - gates_s - evaluator_setup_s).max(0.0);
    let evaluating = (seen - agent_s).max(f64::EPSILON);
    Breakdown {
        image_s,
        containers_s,
        agent_s,
        compile_s,
        correctness_s,
        performance_s,
        evaluator_setup_s,
        performance_parts_s,
        performance_measured_s,
        other_s,
        arena_share: ((image_s + containers_s + evaluator_setup_s + other_s) / evaluating).min(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(run_s: f64) -> ContainerRecord {
        ContainerRecord {
            id: "c".into(),
            exit_code: 0,
            timed_out: false,
            create_s: 0.1,
            start_s: 0.2,
            run_s,
            teardown_s: 0.2,
            stdout: None,
            stderr: None,
            stdout_truncated: false,
            stderr_truncated: false,
        }
    }

    #[test]
    fn gate_time_agent_time_and_the_rest_is_arenas() {
        let t = Timings {
            total_s: 100.0,
            image_s: Some(1.0),
            unseen_s: Some(20.0),
            ..Default::default()
        };
        let containers: BTreeMap<String, ContainerRecord> = [
            ("baseline".to_string(), container(10.0)),
            ("agent".to_string(), container(9.0)),
            ("candidate".to_string(), container(50.0)),
        ]
        .into();
        let evaluators: BTreeMap<String, serde_json::Value> = [
            (
                "baseline".to_string(),
                serde_json::json!({"commands": [
                    {"step": "compile", "wall_s": 2.0},
                    {"step": "correctness", "wall_s": 3.0},
                    {"step": "performance", "wall_s": 4.0}]}),
            ),
            (
                "candidate".to_string(),
                serde_json::json!({"commands": [
                    {"step": "compile", "wall_s": 2.0},
                    {"step": "correctness", "wall_s": 3.0},
                    {"step": "baseline-compile", "wall_s": 2.0},
                    {"step": "perf0-baseline", "wall_s": 20.0},
                    {"step": "perf0-candidate", "wall_s": 20.0}]}),
            ),
            (
                "trusted".to_string(),
                serde_json::json!({"gate_s": {"performance": 1.0},
                    "phases_s": {"start": 0.5, "setup": 2.0, "kernel_processes": 0.25, "close": 0.25},
                    "performance_parts_s": {"window": 0.5, "inputs": 0.25},
                    "performance_measured_s": 0.125}),
            ),
        ]
        .into();
        let evaluators = evaluators
            .into_iter()
            .map(|(k, v): (String, serde_json::Value)| (k, serde_json::from_value(v).unwrap()))
            .collect();
        let b = breakdown(&t, &containers, &evaluators);
        assert_eq!(b.image_s, 1.0);
        assert!((b.containers_s - 1.5).abs() < 1e-9);
        assert_eq!(b.agent_s, 9.0);
        assert_eq!(
            (b.compile_s, b.correctness_s, b.performance_s),
            (6.0, 6.0, 45.0)
        );
        // The trusted evaluator's 3 s outside its gates are named; the rest of the 80 s seen:
        // 80 − 1 − 1.5 − 9 − 57 − 3 = 8.5 s of arena's own.
        assert!((b.evaluator_setup_s - 3.0).abs() < 1e-9, "{b:?}");
        assert!((b.other_s - 8.5).abs() < 1e-9, "{b:?}");
        assert!((b.arena_share - 14.0 / 71.0).abs() < 1e-9, "{b:?}");
        // The trusted evaluator's performance gate by part, and what its batches read; the
        // gate runners' records have none.
        assert_eq!(
            b.performance_parts_s,
            BTreeMap::from([("inputs".to_string(), 0.25), ("window".to_string(), 0.5)])
        );
        assert_eq!(b.performance_measured_s, Some(0.125));
    }
}
