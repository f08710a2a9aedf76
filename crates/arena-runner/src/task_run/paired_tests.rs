//! The candidate phase of a self-reported task, paired: one evaluator container holds the
//! original and the agent's kernel, each in its tree as its own user, and their performance
//! runs are interleaved; `--perf-pairs 0` times the candidate alone, as AgentKernelArena does.

use arena_proto::v1::RunState;

use crate::testing::{bind_of, wait_end, Fixture};

#[tokio::test]
async fn an_untouched_kernel_is_paired_with_the_original_in_one_container() {
    let f = Fixture::new();
    let a = f.agent("noop", "", "");
    let (_, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Done);
    assert_eq!(f.specs("candidate").len(), 2, "one container per task run");
    let r = f.result("out", 0).unwrap();
    assert!(r.candidate.correct());
    assert_eq!(r.candidate.performance.len(), 3);
    for c in &r.candidate.performance {
        assert_eq!(c.execution_time_ms, 10.0);
        assert_eq!(c.pairing.baseline_ms, Some(10.0));
        let pairs = c.pairing.pairs_ms.as_ref().unwrap();
        assert_eq!(pairs.len(), arena_eval::paired::DEFAULT_PAIRS as usize);
    }
    assert_eq!(
        r.candidate.performance_source.as_deref(),
        Some("build/performance_report.json")
    );
    // The order and its seed are in the result; each two rounds start once with each kernel.
    let plan: arena_eval::paired::PairedPlan =
        serde_json::from_value(r.evaluators["candidate"].extra["plan"].clone()).unwrap();
    assert_eq!(plan.rounds.len(), 6);
    assert_ne!(plan.rounds[0][0], plan.rounds[1][0]);
    let check = r.cross_check.unwrap();
    assert_eq!(check.runs_per_kernel, Some(6));
    assert_eq!(check.baseline_wall_s, 0.5);
    // The floor probe ran, found no GPU: only the fixed floor applies.
    assert_eq!(r.candidate.device_floor_ms, None);
    assert_eq!(check.floor_ms, arena_eval::cross_check::FLOOR_MS);
}

#[tokio::test]
async fn a_faster_kernel_is_measured_against_its_paired_original() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=4", "");
    f.run(&a, "out").await;
    let r = f.result("out", 1).unwrap();
    for c in &r.candidate.performance {
        assert_eq!(c.execution_time_ms, 2.5);
        assert_eq!(c.pairing.baseline_ms, Some(10.0));
    }
}

#[tokio::test]
async fn a_kernel_that_fails_correctness_never_reaches_the_rounds() {
    let f = Fixture::new();
    let a = f.agent("broken", "write:correct=fail", "");
    f.run(&a, "out").await;
    let r = f.result("out", 0).unwrap();
    assert!(!r.candidate.correct());
    assert!(r.candidate.performance.is_empty());
    assert!(r.candidate.performance_error.is_none());
    let steps: Vec<String> = r.evaluators["candidate"]
        .commands
        .iter()
        .flatten()
        .map(|c| c.step.clone())
        .collect();
    assert_eq!(steps, ["compile", "correctness"]);
}

#[tokio::test]
async fn no_pairs_times_the_candidate_alone_against_the_baseline_evaluation() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    let mut req = f.request(&a, "out");
    req.perf_pairs = Some(0);
    let (h, _) = f.engine.submit(req, None).await.unwrap();
    assert_eq!(wait_end(&h).await, RunState::Done);
    let cand = f.specs("candidate").remove(0);
    // The sources are bound over the image's task: the tree is copied from it.
    assert!(bind_of(&cand, "/task/source/k.py").is_some());
    assert!(bind_of(&cand, "/arena/candidate/source/k.py").is_none());
    let r = f.result("out", 0).unwrap();
    assert!(r
        .candidate
        .performance
        .iter()
        .all(|c| { c.execution_time_ms == 5.0 && c.pairing.baseline_ms.is_none() }));
    assert_eq!(r.cross_check.unwrap().runs_per_kernel, None);
    let rd = arena_run::RunDir::new(&f.root().join("out")).unwrap();
    assert_eq!(rd.load_record().unwrap().unwrap().perf_pairs, Some(0));
}
