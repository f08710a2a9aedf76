use super::*;
use crate::record::{GateReport, GateStatus};
use serde_json::json;
use std::fs;

#[test]
fn every_two_rounds_start_once_with_each_kernel_and_the_seed_decides() {
    for seed in 0..50 {
        let p = PairedPlan::new(6, seed);
        assert_eq!(p.rounds.len(), 6);
        for two in p.rounds.chunks(2) {
            assert_ne!(two[0][0], two[1][0], "seed {seed}: {:?}", p.rounds);
            for r in two {
                assert_ne!(r[0], r[1]);
            }
        }
        assert_eq!(
            p,
            PairedPlan::new(6, seed),
            "the plan is a function of its seed"
        );
    }
    let firsts: std::collections::BTreeSet<String> = (0..50)
        .map(|s| PairedPlan::new(2, s).rounds[0][0].clone())
        .collect();
    assert_eq!(firsts.len(), 2, "either kernel can go first");
    assert_eq!(PairedPlan::new(3, 1).runs().count(), 6);
    assert_eq!(run_name(2, "baseline"), "perf2-baseline");
}

/// Writes the copies of a run of `role` in round `r` with the cases' times.
fn write_run(out: &Path, r: usize, role: &str, cases: &[(&str, f64)]) {
    let dir = out.join("perf").join(run_name(r, role));
    fs::create_dir_all(&dir).unwrap();
    let list: Vec<serde_json::Value> = cases
        .iter()
        .map(|(id, ms)| json!({"test_case_id": id, "execution_time_ms": ms, "params": {"n": 1}}))
        .collect();
    fs::write(
        dir.join("performance_report.json"),
        serde_json::to_string(&list).unwrap(),
    )
    .unwrap();
}

fn all_passed(plan: &PairedPlan) -> BTreeMap<String, i32> {
    let mut codes: BTreeMap<String, i32> =
        [("compile", 0), ("correctness", 0), (BASELINE_COMPILE, 0)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    for (r, role) in plan.runs() {
        codes.insert(run_name(r, role), 0);
    }
    codes
}

#[test]
fn rounds_become_pairs_per_case_with_the_medians() {
    let d = tempfile::tempdir().unwrap();
    let plan = PairedPlan::new(3, 7);
    let base = [10.0, 11.0, 30.0];
    let cand = [5.0, 5.5, 4.0];
    for r in 0..3 {
        write_run(
            d.path(),
            r,
            "baseline",
            &[("perf1", base[r]), ("perf2", 1.0)],
        );
        write_run(
            d.path(),
            r,
            "candidate",
            &[("perf1", cand[r]), ("perf2", 2.0)],
        );
    }
    let (cases, source) =
        collect_performance(d.path(), &all_passed(&plan), &plan, "triton2triton", None).unwrap();
    assert_eq!(source, "build/performance_report.json");
    assert_eq!(cases.len(), 2);
    let c = &cases[0];
    assert_eq!(c.test_case_id, "perf1");
    assert_eq!(c.execution_time_ms, 5.0);
    assert_eq!(c.pairing.baseline_ms, Some(11.0));
    assert_eq!(
        c.pairing.pairs_ms,
        Some(vec![[10.0, 5.0], [11.0, 5.5], [30.0, 4.0]])
    );
    assert_eq!(c.extra["params"]["n"], 1);
    assert!(c.measured.method.as_deref().unwrap().contains("3 rounds"));
    assert_eq!(cases[1].execution_time_ms, 2.0);
    assert_eq!(cases[1].pairing.baseline_ms, Some(1.0));
}

#[test]
fn a_case_failed_or_missing_in_any_round_fails_with_the_round_named() {
    let d = tempfile::tempdir().unwrap();
    let plan = PairedPlan::new(2, 1);
    for r in 0..2 {
        write_run(d.path(), r, "baseline", &[("perf1", 1.0), ("perf2", 1.0)]);
    }
    write_run(d.path(), 0, "candidate", &[("perf1", 1.0), ("perf2", 1.0)]);
    write_run(d.path(), 1, "candidate", &[("perf1", -1.0)]);
    let (cases, _) =
        collect_performance(d.path(), &all_passed(&plan), &plan, "triton2triton", None).unwrap();
    assert_eq!(cases[0].execution_time_ms, -1.0);
    assert_eq!(
        cases[0].error.as_deref(),
        Some("round 2: original 1 ms, agent's -1 ms")
    );
    assert_eq!(cases[1].execution_time_ms, -1.0);
    assert_eq!(
        cases[1].error.as_deref(),
        Some("round 2: the agent's report lacks it")
    );
    assert!(!cases[0].extra.contains_key("pairs_ms"));
}

#[test]
fn a_run_that_failed_or_was_never_reached_fails_the_gate_by_name() {
    let d = tempfile::tempdir().unwrap();
    let plan = PairedPlan::new(2, 3);
    for r in 0..2 {
        write_run(d.path(), r, "baseline", &[("perf1", 1.0)]);
        write_run(d.path(), r, "candidate", &[("perf1", 1.0)]);
    }
    let mut codes = all_passed(&plan);
    codes.insert(run_name(1, "candidate"), 3);
    let err = collect_performance(d.path(), &codes, &plan, "triton2triton", None).unwrap_err();
    assert_eq!(
        err,
        "the agent's kernel, round 2: perf1-candidate: the command exited 3"
    );
    codes.remove(&run_name(1, "candidate"));
    let err = collect_performance(d.path(), &codes, &plan, "x", Some("timed out after 99 s"))
        .unwrap_err();
    assert!(err.contains("not reached (timed out after 99 s)"), "{err}");
    codes.insert(BASELINE_COMPILE.into(), 1);
    let err = collect_performance(d.path(), &codes, &plan, "x", None).unwrap_err();
    assert!(
        err.starts_with("the original kernel in the paired session: baseline-compile"),
        "{err}"
    );
    let mut codes = all_passed(&plan);
    codes.insert(run_name(0, "baseline"), 97);
    let err = collect_performance(d.path(), &codes, &plan, "x", None).unwrap_err();
    assert!(err.contains("could not be removed"), "{err}");
}

#[test]
fn a_report_missing_from_a_run_fails_the_gate_and_a_duplicate_case_too() {
    let d = tempfile::tempdir().unwrap();
    let plan = PairedPlan::new(1, 0);
    write_run(d.path(), 0, "baseline", &[("perf1", 1.0)]);
    let first = plan.rounds[0][0].clone();
    let err = collect_performance(d.path(), &all_passed(&plan), &plan, "x", None).unwrap_err();
    assert!(
        err.contains("no performance report"),
        "{err} ({first} first)"
    );
    write_run(d.path(), 0, "candidate", &[("perf1", 1.0), ("perf1", 2.0)]);
    let err = collect_performance(d.path(), &all_passed(&plan), &plan, "x", None).unwrap_err();
    assert!(err.contains("case `perf1` appears twice"), "{err}");
}

#[test]
fn wall_times_by_kernel_from_the_record() {
    let rec = json!({"commands": [
        {"step": "compile", "wall_s": 9.0},
        {"step": "perf0-candidate", "wall_s": 2.0},
        {"step": "perf0-baseline", "wall_s": 3.0},
        {"step": "perf1-baseline", "wall_s": 5.0},
        {"step": "perf1-candidate", "wall_s": 4.0},
        {"step": "perf2-candidate", "wall_s": 3.0},
    ]});
    let rec: crate::evaluator_record::EvaluatorRecord = serde_json::from_value(rec).unwrap();
    let (b, c) = run_walls(&rec);
    assert_eq!(b, [3.0, 5.0]);
    assert_eq!(c, [2.0, 4.0, 3.0]);
    assert_eq!(median_wall(&b), Some(4.0));
    assert_eq!(median_wall(&c), Some(3.0));
    assert_eq!(median_wall(&[]), None);
    let rounds = round_walls(&rec);
    assert_eq!(rounds[&0], [Some(3.0), Some(2.0)]);
    assert_eq!(rounds[&2], [None, Some(3.0)]);
}

#[test]
fn a_harness_lying_in_some_rounds_is_caught_in_those() {
    // Four rounds, 1000 calls per case declared: the original takes 1 ms a call (1 s a run).
    // Rounds 2 and 3 report 0.01 ms but their commands took as long as the original's: the
    // median of the candidate's times looks honest, the median ratio would be ~50.
    let pairs = [[1.0, 1.0], [1.0, 0.01], [1.0, 0.01], [1.0, 1.0]];
    let mut c = PerfCase::new("perf1", 0.505);
    c.pairing.pairs_ms = Some(pairs.to_vec());
    let rounds: BTreeMap<usize, [Option<f64>; 2]> =
        (0..4).map(|r| (r, [Some(1.0), Some(1.0)])).collect();
    let bad = first_inconsistent_round(&[c.clone()], &rounds, Some(1000), None).unwrap();
    assert!(bad.reason.starts_with("round 2: "), "{}", bad.reason);
    assert!(
        bad.reason.contains("disagrees with arena's"),
        "{}",
        bad.reason
    );
    // Honest rounds pass, and rounds without both wall times are not judged.
    let mut honest = c;
    honest.pairing.pairs_ms = Some(vec![[1.0, 1.0], [1.0, 1.0]]);
    assert!(first_inconsistent_round(&[honest.clone()], &rounds, Some(1000), None).is_none());
    let partial: BTreeMap<usize, [Option<f64>; 2]> = [(0, [Some(1.0), None])].into();
    assert!(first_inconsistent_round(&[honest], &partial, Some(1000), None).is_none());
}

/// An evaluation that compiled and passed correctness, its performance not yet filled.
fn correct() -> Evaluation {
    Evaluation::new(
        GateReport::new(GateStatus::Ok, None),
        GateReport::new(GateStatus::Ok, None),
        vec![],
    )
}

#[test]
fn a_paired_evaluation_records_what_each_run_autotuned_and_names_a_kernel_that_varied() {
    let d = tempfile::tempdir().unwrap();
    let plan = PairedPlan::new(2, 3);
    let printed = |warps: u32| {
        format!(
            "Triton autotuning for function l2norm_fwd_kernel,\nwith key as (128,),\nfinished after 10.72s,\nbest config selected: BT: 8, num_warps: {warps};\n"
        )
    };
    let mut first_baseline = None;
    for (r, role) in plan.runs() {
        write_run(d.path(), r, role, &[("perf1", 1.0)]);
        // The original picks 1 warp in its first run and 4 in its second; the agent's
        // kernel picks 4 both times.
        let first = role == "baseline" && first_baseline.is_none();
        if first {
            first_baseline = Some(run_name(r, role));
        }
        let dir = d.path().join("perf").join(run_name(r, role));
        fs::write(
            dir.join(crate::aka_perf::OUTPUT),
            printed(if first { 1 } else { 4 }),
        )
        .unwrap();
    }
    let mut e = correct();
    fill(
        &mut e,
        d.path(),
        &all_passed(&plan),
        &plan,
        "triton2triton",
        None,
    );
    assert_eq!(e.performance.len(), 1);
    let a = e.autotuning.expect("recorded");
    assert_eq!(a.runs.len(), 4);
    assert_eq!(
        a.runs[&first_baseline.unwrap()][0].config,
        "BT: 8, num_warps: 1"
    );
    assert_eq!(a.varied.len(), 1, "{:?}", a.varied);
    assert!(
        a.varied[0].starts_with("the original kernel chose 2 configurations of l2norm_fwd_kernel")
    );
    // Runs that print no autotuning leave no record.
    let quiet = tempfile::tempdir().unwrap();
    for (r, role) in plan.runs() {
        write_run(quiet.path(), r, role, &[("perf1", 1.0)]);
    }
    let mut e = correct();
    fill(
        &mut e,
        quiet.path(),
        &all_passed(&plan),
        &plan,
        "triton2triton",
        None,
    );
    assert!(e.autotuning.is_none());
}
