//! More task-run behaviour through the in-memory engine: directions of the speedup, repeats,
//! task selection, limits passed down, events in order, and evaluators kept apart.

use std::collections::BTreeSet;

use arena_proto::v1::{EventKind, RunState};

use crate::testing::{messages, wait_end, Fixture, TASKS};

fn bind_source<'a>(
    spec: &'a arena_runtime::ContainerSpec,
    dst: &str,
) -> Option<&'a std::path::Path> {
    spec.config
        .binds
        .iter()
        .find(|b| b.destination == dst)
        .map(|b| b.source.as_path())
}

fn speedup(r: &arena_run::TaskResult) -> f64 {
    let b: f64 = r
        .baseline
        .performance
        .iter()
        .map(|c| c.execution_time_ms)
        .sum();
    let c: f64 = r
        .candidate
        .performance
        .iter()
        .map(|c| c.execution_time_ms)
        .sum();
    b / c
}

#[tokio::test]
async fn a_slower_kernel_measures_slower_than_the_original() {
    let f = Fixture::new();
    let a = f.agent("slow", "write:speed=0.5", "");
    let (_, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Done);
    let r = f.result("out", 0).unwrap();
    assert!(r.candidate.correct());
    // Baseline 10 ms per case, the candidate 20 ms: half as fast, never the other way round.
    assert!((speedup(&r) - 0.5).abs() < 1e-9, "{}", speedup(&r));
    assert!(r
        .baseline
        .performance
        .iter()
        .all(|c| c.execution_time_ms == 10.0));
}

#[tokio::test]
async fn repeats_run_each_task_that_often_in_containers_of_their_own() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    let mut req = f.request(&a, "out");
    req.runs = 3;
    let (h, _) = f.engine.submit(req, None).await.unwrap();
    assert_eq!(wait_end(&h).await, RunState::Done);
    let rd = arena_run::RunDir::new(&f.root().join("out")).unwrap();
    for t in TASKS {
        for repeat in 0..3 {
            let item = arena_run::Item {
                task_id: t.into(),
                repeat,
            };
            let r = rd
                .load_result(&item)
                .unwrap_or_else(|| panic!("{t}#{repeat}"));
            assert_eq!(r.repeat, repeat);
        }
    }
    let ids: BTreeSet<String> = f.fake.history().into_iter().map(|s| s.id).collect();
    assert_eq!(
        ids.len(),
        2 * 3 * 3,
        "baseline, agent and candidate per task run, none shared"
    );
}

#[tokio::test]
async fn only_the_selected_tasks_run() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    let mut req = f.request(&a, "out");
    req.tasks = vec![TASKS[1].to_string()];
    let (h, _) = f.engine.submit(req, None).await.unwrap();
    assert_eq!(wait_end(&h).await, RunState::Done);
    assert!(f.result("out", 0).is_none());
    assert!(f.result("out", 1).is_some());
    let marker = crate::task_run::task_marker(TASKS[0]);
    assert!(f.fake.history().iter().all(|s| !s.id.contains(&marker)));
}

#[tokio::test]
async fn the_runs_memory_reaches_every_container() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    let mut req = f.request(&a, "out");
    req.memory = Some(3 << 30);
    let (h, _) = f.engine.submit(req, None).await.unwrap();
    assert_eq!(wait_end(&h).await, RunState::Done);
    let history = f.fake.history();
    assert_eq!(history.len(), 6);
    for s in history {
        assert_eq!(s.config.limits.memory_bytes, 3 << 30, "{}", s.id);
    }
}

#[tokio::test]
async fn each_evaluation_writes_into_a_directory_of_its_own() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    f.run(&a, "out").await;
    let outs: Vec<_> = f
        .fake
        .history()
        .iter()
        .filter(|s| !s.id.ends_with("-agent"))
        .map(|s| {
            bind_source(s, "/arena/out")
                .expect("an out directory")
                .to_path_buf()
        })
        .collect();
    assert_eq!(outs.len(), 4);
    let distinct: BTreeSet<_> = outs.iter().collect();
    assert_eq!(
        distinct.len(),
        4,
        "evaluations share an out directory: {outs:?}"
    );
}

#[tokio::test]
async fn events_follow_the_phases_of_each_task_run_and_the_run_ends_last() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    let (h, _) = f.run(&a, "out").await;
    let events = h.events.subscribe().0;
    let rank = |k: i32| match EventKind::try_from(k).unwrap() {
        EventKind::TaskQueued => 0,
        EventKind::TaskResumed | EventKind::ImageVerified => 1,
        EventKind::BaselineGate => 2,
        EventKind::AgentStarted => 3,
        EventKind::AgentFinished => 4,
        EventKind::EvaluatorGate => 5,
        EventKind::TaskResult | EventKind::TaskError => 6,
        _ => 7,
    };
    for t in TASKS {
        let ranks: Vec<u8> = events
            .iter()
            .filter(|e| e.task_id == t)
            .map(|e| rank(e.kind))
            .collect();
        assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{t}: {ranks:?}");
        assert_eq!(ranks.first(), Some(&0), "{t}");
        assert_eq!(ranks.last(), Some(&6), "{t}");
        assert_eq!(
            ranks.iter().filter(|r| **r == 6).count(),
            1,
            "{t}: one result"
        );
    }
    assert_eq!(events.last().unwrap().kind, EventKind::RunDone as i32);
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>());
    assert_eq!(messages(&h, EventKind::TaskResult).len(), 2);
}
