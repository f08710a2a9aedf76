//! The engine through the in-memory container engine: reservations, resume, infrastructure
//! errors, cancel, leases, policy and ownership.

use std::sync::Arc;
use std::time::Duration;

use arena_proto::v1::{EventKind, RunState};
use arena_run::rundir::ResultState;
use arena_run::{Item, RunDir};

use crate::testing::{messages, wait_end, Fixture, TASKS};
use crate::RunnerError;

fn item(i: usize) -> Item {
    Item {
        task_id: TASKS[i].into(),
        repeat: 0,
    }
}

#[tokio::test]
async fn a_second_submission_of_a_running_run_is_refused_and_the_first_is_untouched() {
    let f = Fixture::new();
    let a = f.agent("sleeper", "sleep", "timeout_s = 1\n");
    let (h, _) = f.engine.submit(f.request(&a, "out"), None).await.unwrap();
    let e = match f.engine.submit(f.request(&a, "out"), None).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a second submission started"),
    };
    assert!(e.contains("is already running"), "{e}");
    assert_eq!(wait_end(&h).await, RunState::Done);
    assert!(f.result("out", 0).is_some() && f.result("out", 1).is_some());
}

#[tokio::test]
async fn concurrent_submissions_of_one_run_start_it_once() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    let (x, y) = tokio::join!(
        f.engine.submit(f.request(&a, "out"), None),
        f.engine.submit(f.request(&a, "out"), None)
    );
    let started: Vec<_> = [x, y].into_iter().filter_map(|r| r.ok()).collect();
    assert_eq!(started.len(), 1, "exactly one submission starts the run");
    wait_end(&started[0].0).await;
    assert_eq!(f.specs("agent").len(), 2, "one agent per task, not two");
}

#[tokio::test]
async fn a_resumed_run_keeps_its_id_and_finished_task_runs() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    let (h1, _) = f.run(&a, "out").await;
    let created = f.fake.history().len();
    let (h2, done) = f.engine.submit(f.request(&a, "out"), None).await.unwrap();
    assert_eq!(done, 2);
    assert_eq!(h2.record.run_id, h1.record.run_id);
    assert_eq!(wait_end(&h2).await, RunState::Done);
    assert_eq!(f.fake.history().len(), created, "nothing ran again");
    // Another directory is another run, with another unguessable id.
    let (h3, _) = f.run(&a, "other").await;
    assert_ne!(h3.record.run_id, h1.record.run_id);
}

#[tokio::test]
async fn an_unreadable_result_is_kept_and_reported_never_deleted() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    f.run(&a, "out").await;
    let rd = RunDir::new(&f.root().join("out")).unwrap();
    let path = rd.result_path(&item(0));
    std::fs::write(&path, "{ half a result").unwrap();
    std::fs::write(rd.item_dir(&item(0)).join("notes.txt"), "keep me").unwrap();
    let (h, _) = f.engine.submit(f.request(&a, "out"), None).await.unwrap();
    assert_eq!(wait_end(&h).await, RunState::Failed);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ half a result");
    assert!(rd.item_dir(&item(0)).join("notes.txt").exists());
    assert!(matches!(
        rd.result_state(&item(0)),
        ResultState::Unreadable(_)
    ));
    let errors = messages(&h, EventKind::TaskError);
    assert!(
        errors[0].contains("result.json") && errors[0].contains("kept"),
        "{errors:?}"
    );
}

#[tokio::test]
async fn an_engine_failure_is_an_infrastructure_error_never_a_result_and_is_retried() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    f.fake
        .fail_next("create", "-candidate", "containerd went away");
    let (h, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Failed);
    let rd = RunDir::new(&f.root().join("out")).unwrap();
    let set: arena_run::result::ResultSet =
        serde_json::from_slice(&std::fs::read(rd.results_path()).unwrap()).unwrap();
    assert_eq!(set.tasks.len(), 1);
    assert_eq!(set.infra_errors.len(), 1);
    assert!(set.infra_errors[0].reason.contains("containerd went away"));
    assert!(messages(&h, EventKind::TaskError)[0].contains("containerd went away"));
    // The next start of the run retries it, and only it.
    let (h2, done) = f.engine.submit(f.request(&a, "out"), None).await.unwrap();
    assert_eq!(done, 1);
    assert_eq!(wait_end(&h2).await, RunState::Done);
    let set = rd.result_set(&h2.record.run_id, &h2.items);
    assert_eq!((set.tasks.len(), set.infra_errors.len()), (2, 0));
}

#[tokio::test]
async fn a_panic_in_a_task_run_returns_its_gpu_and_is_recorded() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    // Before the task run's own ensure_image: the checks at submit, and the import the
    // queue makes before the task run takes a GPU.
    f.fake.panic_nth("ensure_image", TASKS[0], 3);
    let (h, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Failed);
    let errors = messages(&h, EventKind::TaskError);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].contains("internal error") && errors[0].contains("injected panic"),
        "{errors:?}"
    );
    let rd = RunDir::new(&f.root().join("out")).unwrap();
    assert!(rd.infra_error_path(&item(0)).exists());
    // One GPU: the other task run got it after the panic.
    assert_eq!(
        h.rundir.result_set(&h.record.run_id, &h.items).tasks.len(),
        1
    );
    assert_eq!(f.engine.pool.busy_with(0), None);
}

/// The queue imports a task run's images before it takes a GPU; a panic there is the
/// import's alone: the task run imports again and the run ends with every result.
#[tokio::test]
async fn a_panic_while_importing_ahead_leaves_the_queue_running() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    f.fake.panic_nth("ensure_image", TASKS[0], 2);
    let (h, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Done);
    assert!(messages(&h, EventKind::TaskError).is_empty());
    assert_eq!(
        h.rundir.result_set(&h.record.run_id, &h.items).tasks.len(),
        2
    );
}

/// Device slots import each task run's images before it takes one (one more ensure_image per
/// task run than its own); CPU slots do not, as their kernels are timed on the cores an
/// import would take.
#[tokio::test]
async fn only_device_slots_import_ahead() {
    let mut counts = Vec::new();
    for gpus in ["fake:1", "cpu:1"] {
        let f = Fixture::with_gpus(gpus);
        let a = f.agent("fast", "write:speed=2", "");
        let (_, state) = f.run(&a, "out").await;
        assert_eq!(state, RunState::Done);
        let ensured = f
            .fake
            .calls()
            .iter()
            .filter(|c| c.starts_with("ensure_image "))
            .count();
        counts.push(ensured);
    }
    assert_eq!(counts[0], counts[1] + TASKS.len(), "{counts:?}");
}

#[tokio::test]
async fn a_panic_inside_a_container_lifecycle_is_an_infrastructure_error_too() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    f.fake.panic_next("create", "-agent");
    let (h, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Failed);
    let errors = messages(&h, EventKind::TaskError);
    assert!(
        errors[0].contains("panicked") && errors[0].contains("injected panic"),
        "{errors:?}"
    );
    assert!(f.fake.containers().is_empty(), "what it created is gone");
}

#[tokio::test]
async fn cancel_stops_the_run_and_the_same_request_resumes_it() {
    let f = Fixture::new();
    let a = f.agent("sleeper", "sleep", "timeout_s = 1\n");
    let (h, _) = f.engine.submit(f.request(&a, "out"), None).await.unwrap();
    while f.fake.containers().iter().all(|c| !c.ends_with("-agent")) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    h.cancel();
    assert_eq!(wait_end(&h).await, RunState::Cancelled);
    assert!(f.fake.containers().is_empty());
    assert!(f.result("out", 0).is_none());
    let (_, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Done);
    assert!(f.result("out", 0).unwrap().containers["agent"].timed_out);
}

#[tokio::test]
async fn what_a_killed_runner_left_of_the_run_is_removed_on_resume() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    f.run(&a, "out").await;
    let rd = RunDir::new(&f.root().join("out")).unwrap();
    let run_id = rd.load_record().unwrap().unwrap().run_id;
    std::fs::remove_file(rd.result_path(&item(1))).unwrap();
    // A container of this run, still there from an earlier runner.
    let left = arena_runtime::ContainerSpec {
        id: format!("{run_id}-abcdef-00000000-r0-agent"),
        ..f.specs("agent")[0].clone()
    };
    arena_runtime::ContainerRuntime::create(&f.fake, &left)
        .await
        .unwrap();
    let (h, done) = f.engine.submit(f.request(&a, "out"), None).await.unwrap();
    assert_eq!(done, 1);
    assert_eq!(wait_end(&h).await, RunState::Done);
    assert!(f.fake.containers().is_empty());
    assert!(f.result("out", 1).is_some());
}

#[tokio::test]
async fn two_gpus_take_the_two_task_runs_at_once() {
    let f = Fixture::with_gpus("fake:2");
    let a = f.agent("fast", "write:speed=2", "");
    f.run(&a, "out").await;
    let gpus: std::collections::BTreeSet<u32> = (0..2)
        .map(|i| f.result("out", i).unwrap().gpu.unwrap().index)
        .collect();
    assert_eq!(gpus.len(), 2);
}

#[tokio::test]
async fn an_image_of_another_digest_under_the_locked_name_refuses_the_run() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    f.fake.hold_image(
        &format!("arena/test/{}", TASKS[0]),
        arena_digest::Digest::of_bytes(b"someone else's"),
    );
    let e = match f.engine.submit(f.request(&a, "out"), None).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("started on a drifted image"),
    };
    assert!(
        e.contains(TASKS[0]) && e.contains("differs from the lockfile"),
        "{e}"
    );
    assert!(f.fake.history().is_empty());
}

#[tokio::test]
async fn an_image_without_layers_is_refused_with_its_name() {
    let f = Fixture::new();
    let mut lock = arena_image::Lockfile::load(&f.lock_path).unwrap();
    lock.images[0].layers.clear();
    lock.write(&f.lock_path).unwrap();
    let a = f.agent("fast", "write:speed=2", "");
    let e = match f.engine.submit(f.request(&a, "out"), None).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("started"),
    };
    assert!(e.contains("has no layers"), "{e}");
}

#[tokio::test]
async fn the_runner_refuses_agents_its_policy_does_not_allow() {
    let f = Fixture::new();
    let host = f.agent("hostnet", "", "network = \"host\"\n");
    let e = match f.engine.submit(f.request(&host, "out"), None).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("started"),
    };
    assert!(e.contains("--allow-host-network"), "{e}");
    let etc = f.agent(
        "etc",
        "",
        "[[mount]]\nhost = \"/etc\"\ncontainer = \"/x\"\n",
    );
    let e = match f.engine.submit(f.request(&etc, "out2"), None).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("started"),
    };
    assert!(e.contains("mount[0].host") && e.contains("/etc"), "{e}");
    assert!(f.fake.history().is_empty(), "nothing was created");
}

#[tokio::test]
async fn a_run_belongs_to_who_submitted_it() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    let (h, _) = f
        .engine
        .submit(f.request(&a, "out"), Some("alice".into()))
        .await
        .unwrap();
    wait_end(&h).await;
    let e = f
        .engine
        .submit(f.request(&a, "out"), Some("mallory".into()))
        .await;
    match e {
        Err(RunnerError::PermissionDenied(m)) => assert!(m.contains("belongs to alice"), "{m}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("mallory resumed alice's run"),
    }
    // An admin may.
    let (h2, done) = f
        .engine
        .submit(f.request(&a, "out"), Some("admin".into()))
        .await
        .unwrap();
    assert_eq!(done, 2);
    assert_eq!(h2.record.owner.as_deref(), Some("alice"));
    wait_end(&h2).await;
}

/// On a runtime with one thread, anything that blocked a worker waiting for another task
/// would hang the run: it must end.
#[test]
fn a_whole_run_completes_on_a_single_threaded_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let f = Fixture::with_gpus("fake:2");
        let a = f.agent("fast", "write:speed=2", "");
        let end = tokio::time::timeout(Duration::from_secs(60), f.run(&a, "out")).await;
        let (_, state) = end.expect("the run ended");
        assert_eq!(state, RunState::Done);
        let _ = Arc::strong_count(&f.engine);
    });
}

#[tokio::test]
async fn a_host_network_agent_runs_only_where_allowed_and_the_run_says_so() {
    let mut f = Fixture::new();
    let a = f.agent("hostnet", "noop", "network = \"host\"\n");
    let e = match f.engine.submit(f.request(&a, "refused"), None).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a host-network agent ran on a runner that does not allow it"),
    };
    assert!(
        e.contains("network") && e.contains("--allow-host-network"),
        "{e}"
    );
    Arc::get_mut(&mut f.engine)
        .expect("the fixture's engine is not shared")
        .policy
        .allow_host_network = true;
    let (h, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Done);
    let notes = messages(&h, EventKind::TaskQueued);
    assert!(
        notes
            .iter()
            .any(|m| m.starts_with("warning:") && m.contains("host's network namespace")),
        "{notes:?}"
    );
    // The agents' containers got the host's network, as asked.
    let specs = f.specs("agent");
    assert!(!specs.is_empty());
    assert!(specs
        .iter()
        .all(|s| s.config.network == arena_runtime::Network::Host));
}

#[tokio::test]
async fn a_link_planted_in_the_run_directory_is_refused_and_nothing_is_touched_through_it() {
    let f = Fixture::new();
    let a = f.agent("ok", "noop", "");
    // Someone with write access to the run directory makes a task's directory a link to a
    // directory of the host's (which holds an `r0` of its own) before the runner gets there.
    let victim = f.root().join("victim");
    std::fs::create_dir_all(victim.join("r0")).unwrap();
    std::fs::write(victim.join("r0/keep.txt"), "precious").unwrap();
    let rd = RunDir::new(&f.root().join("out")).unwrap();
    let task_dir = rd.item_dir(&item(0)).parent().unwrap().to_path_buf();
    std::fs::create_dir_all(task_dir.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&victim, &task_dir).unwrap();
    let e = match f.engine.submit(f.request(&a, "out"), None).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a run went ahead through a planted link"),
    };
    assert!(
        e.contains("a symbolic link") && e.contains("refused"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("r0/keep.txt")).unwrap(),
        "precious"
    );
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
    assert!(f.specs("agent").is_empty(), "an agent ran");
}
