//! The Evaluate API's line and warm evaluators, against a fake warmer whose evaluators take a
//! set time (test_double.rs): reuse, back-pressure, deadlines, callers that go away, GPUs
//! shared between tasks, evaluators that retire, and candidate staging.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::test_double::*;
use super::*;

#[tokio::test]
async fn an_evaluator_stays_warm_for_the_next_request_of_its_task() {
    let s = setup("cpu:1", PoolSettings::default(), 5, None);
    let t = served(&s.root, "python2python/t/a");
    let c = candidate(&s, &t, "def k(x):\n    return x\n");
    let warm: Vec<bool> = {
        let mut v = Vec::new();
        // The last asks for fewer pairs and every output checked: its evaluator is told so.
        let asked = RequestTiming {
            pairs: Some(3),
            checked_calls: Some(0),
        };
        for timing in [RequestTiming::default(), RequestTiming::default(), asked] {
            v.push(
                s.pool
                    .evaluate(t.clone(), &c, timing, later(5000))
                    .await
                    .unwrap()
                    .warm,
            );
        }
        v
    };
    assert_eq!(warm, [false, true, true]);
    assert_eq!(s.log.count("start"), 1);
    assert_eq!(s.log.count("eval"), 3);
    let asked = |l: &&String| l.starts_with("eval") && l.ends_with(" pairs=3 checked=0");
    assert_eq!(s.log.0.lock().unwrap().iter().filter(asked).count(), 1);
    assert_eq!(s.pool.idle(), 1);
    assert_eq!(s.pool.admitted(), 0);
}

#[tokio::test]
async fn a_full_queue_refuses_at_once_and_every_request_gets_one_answer() {
    let settings = PoolSettings {
        limit: 4,
        ..Default::default()
    };
    let s = setup("cpu:1", settings, 50, None);
    let t = served(&s.root, "python2python/t/a");
    let c = Arc::new(candidate(&s, &t, "def k(x):\n    return x\n"));
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..12 {
        let (pool, t, c) = (s.pool.clone(), t.clone(), c.clone());
        calls.spawn(async move {
            (
                i,
                pool.evaluate(t, &c, RequestTiming::default(), later(10_000))
                    .await,
            )
        });
    }
    let mut ok = Vec::new();
    let mut busy = 0;
    while let Some(r) = calls.join_next().await {
        match r.unwrap() {
            (i, Ok(served)) => ok.push((i, served.evaluated.record.seed.clone())),
            (_, Err(EvalError::Busy(m))) => {
                assert!(m.contains("limit is 4"), "{m}");
                busy += 1
            }
            (_, Err(e)) => panic!("{e}"),
        }
    }
    assert_eq!((ok.len(), busy), (4, 8));
    // One evaluation each, none twice: the evaluator counted 1..4.
    let mut seeds: Vec<i64> = ok
        .iter()
        .map(|(_, s)| s.as_deref().unwrap().parse().unwrap())
        .collect();
    seeds.sort();
    assert_eq!(seeds, [1, 2, 3, 4]);
    assert_eq!(s.log.count("eval"), 4);
    assert_eq!(s.pool.admitted(), 0);
}

#[tokio::test]
async fn a_deadline_passed_in_the_queue_answers_deadline_exceeded() {
    let s = setup("cpu:1", PoolSettings::default(), 300, None);
    let t = served(&s.root, "python2python/t/a");
    let c = Arc::new(candidate(&s, &t, "def k(x):\n    return x\n"));
    let (p, t2, c2) = (s.pool.clone(), t.clone(), c.clone());
    let first = tokio::spawn(async move {
        p.evaluate(t2, &c2, RequestTiming::default(), later(5000))
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let e = s
        .pool
        .evaluate(t.clone(), &c, RequestTiming::default(), later(100))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(e, EvalError::Deadline(ref m) if m.contains("queued")),
        "{e:?}"
    );
    assert!(first.await.unwrap().is_ok());
    assert_eq!(s.pool.admitted(), 0);
}

#[tokio::test]
async fn a_caller_that_goes_away_stops_its_evaluator_and_the_next_gets_a_fresh_one() {
    let s = setup("cpu:1", PoolSettings::default(), 300, None);
    let t = served(&s.root, "python2python/t/a");
    let c = candidate(&s, &t, "def k(x):\n    return x\n");
    let gone = tokio::time::timeout(
        Duration::from_millis(100),
        s.pool
            .evaluate(t.clone(), &c, RequestTiming::default(), later(5000)),
    )
    .await;
    assert!(gone.is_err(), "the caller gave up first");
    // The evaluator it held is stopped (in a task of its own), its GPU back.
    for _ in 0..100 {
        if s.log.count("stop") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(s.log.count("stop"), 1);
    let served = s
        .pool
        .evaluate(t.clone(), &c, RequestTiming::default(), later(5000))
        .await
        .unwrap();
    assert!(
        !served.warm,
        "never the evaluator that may still run the other's candidate"
    );
    assert_eq!(s.log.count("start"), 2);
}

#[tokio::test]
async fn one_gpu_goes_to_the_task_asked_for_and_idle_evaluators_give_it_back() {
    let settings = PoolSettings {
        idle: Duration::from_millis(150),
        ..Default::default()
    };
    let s = setup("cpu:1", settings, 5, None);
    let (a, b) = (
        served(&s.root, "python2python/t/a"),
        served(&s.root, "python2python/t/b"),
    );
    let (ca, cb) = (
        candidate(&s, &a, "def k(x):\n    return x\n"),
        candidate(&s, &b, "def k(x):\n    return x\n"),
    );
    s.pool
        .evaluate(a.clone(), &ca, RequestTiming::default(), later(5000))
        .await
        .unwrap();
    // b's request takes the GPU a's idle evaluator holds: a's is stopped first.
    s.pool
        .evaluate(b.clone(), &cb, RequestTiming::default(), later(5000))
        .await
        .unwrap();
    let log = s.log.0.lock().unwrap().clone();
    let stop_a = log
        .iter()
        .position(|l| l.starts_with("stop python2python/t/a"))
        .unwrap();
    let start_b = log
        .iter()
        .position(|l| l.starts_with("start python2python/t/b"))
        .unwrap();
    assert!(stop_a < start_b, "{log:?}");
    // Idle past its time, b's evaluator goes too: the GPU is the runs' again.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(s.pool.idle(), 0);
    assert_eq!(s.log.count("stop"), 2);
}

#[tokio::test]
async fn an_evaluator_that_must_retire_is_not_used_again() {
    let s = setup("cpu:1", PoolSettings::default(), 5, Some(1));
    let t = served(&s.root, "python2python/t/a");
    let c = candidate(&s, &t, "def k(x):\n    return x\n");
    let first = s
        .pool
        .evaluate(t.clone(), &c, RequestTiming::default(), later(5000))
        .await
        .unwrap();
    assert!(first.evaluated.retire.is_some());
    let second = s
        .pool
        .evaluate(t.clone(), &c, RequestTiming::default(), later(5000))
        .await
        .unwrap();
    assert!(!second.warm);
    assert_eq!(s.log.count("start"), 2);
}

#[tokio::test]
async fn an_idle_evaluator_whose_container_ended_is_not_handed_out() {
    let s = setup("cpu:1", PoolSettings::default(), 5, None);
    let t = served(&s.root, "python2python/t/a");
    let c = candidate(&s, &t, "def k(x):\n    return x\n");
    assert!(
        !s.pool
            .evaluate(t.clone(), &c, RequestTiming::default(), later(5000))
            .await
            .unwrap()
            .warm
    );
    s.dead.store(true, Ordering::SeqCst);
    let next = s
        .pool
        .evaluate(t.clone(), &c, RequestTiming::default(), later(5000))
        .await
        .unwrap();
    assert!(!next.warm, "a dead evaluator was handed out");
    assert_eq!(s.log.count("start"), 2);
    assert!(s.log.count("stop") >= 1);
}

#[tokio::test]
async fn a_caller_gone_during_a_start_holds_the_gpu_until_that_evaluator_stops() {
    let s = setup("cpu:1", PoolSettings::default(), 5, None);
    s.start_ms.store(300, Ordering::SeqCst);
    let t = served(&s.root, "python2python/t/a");
    let c = candidate(&s, &t, "def k(x):\n    return x\n");
    let gone = tokio::time::timeout(
        Duration::from_millis(50),
        s.pool
            .evaluate(t.clone(), &c, RequestTiming::default(), later(5000)),
    )
    .await;
    assert!(gone.is_err(), "the caller went away first");
    // The start goes on with the GPU; nobody takes the evaluator: it is stopped, then the
    // GPU is free.
    assert!(s.gpus.busy_with(0).is_some(), "the GPU went back mid-start");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(s.log.count("start"), 1);
    assert_eq!(s.log.count("stop"), 1);
    assert_eq!(s.gpus.busy_with(0), None);
}

#[tokio::test]
async fn shutdown_waits_for_evaluators_being_stopped() {
    let s = setup("cpu:1", PoolSettings::default(), 5, Some(1));
    let t = served(&s.root, "python2python/t/a");
    let c = candidate(&s, &t, "def k(x):\n    return x\n");
    // It must retire: its stop runs in a task of its own, which shutdown waits for.
    s.pool
        .evaluate(t.clone(), &c, RequestTiming::default(), later(5000))
        .await
        .unwrap();
    s.pool.shutdown().await;
    assert_eq!(s.log.count("stop"), 1);
    assert_eq!(s.gpus.busy_with(0), None);
}

#[tokio::test]
async fn a_failed_start_is_the_requests_error_and_gives_the_gpu_back() {
    let s = setup("cpu:1", PoolSettings::default(), 1, None);
    s.fail_start.store(true, Ordering::SeqCst);
    let t = served(&s.root, "python2python/t/a");
    let c = candidate(&s, &t, "x");
    for _ in 0..2 {
        let e = s
            .pool
            .evaluate(t.clone(), &c, RequestTiming::default(), later(2000))
            .await
            .err()
            .unwrap();
        assert_eq!(e, EvalError::Precondition("the original fails".into()));
    }
    assert_eq!(s.gpus.busy_with(0), None);
}

#[test]
fn a_candidate_is_only_the_tasks_agent_files_and_its_digest_names_its_content() {
    let dir = tempfile::tempdir().unwrap();
    let t = served(dir.path(), "python2python/t/a");
    let one = |name: &str, body: &[u8]| BTreeMap::from([(name.to_string(), body.to_vec())]);
    let e = candidate::stage(&t.task, one("scripts/h.py", b"x"), dir.path())
        .err()
        .unwrap();
    assert!(
        matches!(&e, EvalError::Invalid(m) if m.contains("`scripts/h.py` is not one of the task's agent files (source/k.py)")),
        "{e:?}"
    );
    assert!(candidate::stage(&t.task, BTreeMap::new(), dir.path()).is_err());
    let big = vec![b'#'; (arena_eval::sources::SOURCE_CAP + 1) as usize];
    assert!(candidate::stage(&t.task, one("source/k.py", &big), dir.path()).is_err());
    let a = candidate::stage(&t.task, one("./source/k.py", b"A"), dir.path()).unwrap();
    let a2 = candidate::stage(&t.task, one("source/k.py", b"A"), dir.path()).unwrap();
    let b = candidate::stage(&t.task, one("source/k.py", b"B"), dir.path()).unwrap();
    assert_eq!(a.digest, a2.digest);
    assert_ne!(a.digest, b.digest);
    assert_eq!(
        a.digest,
        candidate_digest(&BTreeMap::from([(
            "source/k.py".to_string(),
            b"A".to_vec()
        )]))
    );
    assert_eq!(std::fs::read(a.staged.join("source/k.py")).unwrap(), b"A");
    // A file without a path is the task's only agent file.
    let unnamed = candidate::stage(&t.task, one("", b"A"), dir.path()).unwrap();
    assert_eq!(unnamed.digest, a.digest);
    drop(a);
}
