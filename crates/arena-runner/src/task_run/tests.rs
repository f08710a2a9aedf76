//! Each phase of a task run, through the in-memory engine: what every container is given,
//! in which order, and what the result records.

use arena_proto::v1::{EventKind, RunState};
use arena_run::Trust;

use crate::testing::{bind_of, messages, Fixture, TASKS};

#[tokio::test]
async fn phases_run_in_order_baseline_agent_candidate() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    let (h, state) = f.run(&a, "out").await;
    assert_eq!(
        state,
        RunState::Done,
        "{:?}",
        messages(&h, EventKind::TaskError)
    );
    let phases: Vec<String> = f
        .fake
        .history()
        .iter()
        .filter(|s| s.id.contains(&crate::task_run::task_marker(TASKS[0])))
        .map(|s| s.id.rsplit('-').next().unwrap().to_string())
        .collect();
    assert_eq!(phases, ["baseline", "agent", "candidate"]);
    assert!(f.fake.containers().is_empty(), "every container removed");
}

#[tokio::test]
async fn an_optimizing_agent_gets_its_times_and_the_baseline_keeps_the_original() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=4", "");
    f.run(&a, "out").await;
    let r = f.result("out", 0).unwrap();
    assert!(r.candidate.correct());
    let ms: Vec<f64> = r
        .candidate
        .performance
        .iter()
        .map(|c| c.execution_time_ms)
        .collect();
    assert_eq!(ms, [2.5, 2.5, 2.5]);
    assert!(r
        .baseline
        .performance
        .iter()
        .all(|c| c.execution_time_ms == 10.0));
}

#[tokio::test]
async fn the_agent_gets_the_workspace_read_write_and_the_task_read_only() {
    let f = Fixture::new();
    let a = f.agent("noop", "", "env_passthrough = [\"NOT_SET_ANYWHERE\"]\n");
    f.run(&a, "out").await;
    let spec = f.specs("agent").remove(0);
    let ws = bind_of(&spec, "/workspace").unwrap();
    assert!(!ws.readonly && ws.source.ends_with("r0/workspace"));
    let reference = bind_of(&spec, "/reference").unwrap();
    assert!(reference.readonly && reference.source.ends_with(TASKS[0]));
    assert!(bind_of(&spec, "/arena").unwrap().readonly);
    assert_eq!(spec.config.network, arena_runtime::Network::None);
    let env = &spec.config.env;
    assert!(env.contains(&format!("ARENA_TASK_ID={}", TASKS[0])));
    assert!(
        env.contains(&format!("TASK={}", TASKS[0])),
        "the image's Env"
    );
    assert!(env.contains(&"FAKE_AGENT=".to_string()));
    assert!(!env.iter().any(|e| e.starts_with("NOT_SET_ANYWHERE")));
    let prompt = f
        .root()
        .join("out/tasks")
        .join(TASKS[0].replace('/', "__"))
        .join("r0/agent/prompt.md");
    assert!(std::fs::read_to_string(prompt)
        .unwrap()
        .contains("source/k.py"));
}

#[tokio::test]
async fn the_agent_runs_on_a_read_only_root_in_a_sized_workspace_under_a_watchdog() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "timeout_s = 7\n");
    f.run(&a, "out").await;
    let spec = f.specs("agent").remove(0);
    assert!(spec.config.readonly_rootfs);
    assert!(spec
        .config
        .tmpfs
        .iter()
        .any(|t| t.destination == "/var/tmp"));
    assert_eq!(spec.config.limits.memory_bytes, 16 << 30);
    // Root in its container, with no capability at all: the GPU driver refuses NVML's
    // settings (clocks, power limit, compute mode) to a process without CAP_SYS_ADMIN, so an
    // agent cannot change the device the evaluations after it run on (ci/gpu/nvml-privilege.py,
    // docs/benchmarks.md).
    assert!(
        spec.config.capabilities.is_empty(),
        "{:?}",
        spec.config.capabilities
    );
    // The watchdog: sh runs the agent and kills everything 4 s past its timeout.
    assert_eq!(spec.config.args[0], "/bin/sh");
    assert_eq!(spec.config.args[3..5], ["arena-deadline", "11"]);
    assert_eq!(spec.config.args.last().unwrap(), "fake-agent");
    // The workspace was a file system of its own, released once its sources were taken,
    // and what the agent left is kept.
    // (Each task run's directory is released once before it starts, in case an earlier
    // attempt left it mounted.)
    let mounts: Vec<String> = f
        .fake
        .calls()
        .into_iter()
        .filter(|c| c.contains("_scratch") && c.contains("alpha"))
        .map(|c| c.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(
        mounts,
        ["unmount_scratch", "mount_scratch", "unmount_scratch"]
    );
    assert!(f.fake.scratch().is_empty());
    let kept = f
        .root()
        .join("out/tasks")
        .join(TASKS[0].replace('/', "__"))
        .join("r0/workspace.kept/source/k.py");
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "speed=2");
}

#[tokio::test]
async fn evaluators_never_see_the_workspace_only_the_staged_sources_read_only() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    f.run(&a, "out").await;
    for phase in ["baseline", "candidate"] {
        for spec in f.specs(phase) {
            assert_eq!(spec.config.network, arena_runtime::Network::None);
            assert!(
                !spec
                    .config
                    .binds
                    .iter()
                    .any(|b| b.source.to_string_lossy().contains("workspace")),
                "{phase}: {:?}",
                spec.config.binds
            );
        }
    }
    let cand = f.specs("candidate").remove(0);
    // Paired: the image's task stays the original's; the agent's sources come in apart.
    let k = bind_of(&cand, "/arena/candidate/source/k.py").unwrap();
    assert!(k.readonly && k.source.ends_with("staged/candidate/source/k.py"));
    assert!(bind_of(&cand, "/task/source/k.py").is_none());
    assert!(bind_of(&f.specs("baseline")[0], "/task/source/k.py").is_none());
    assert!(bind_of(&cand, "/arena/trusted").unwrap().readonly);
    assert!(bind_of(&cand, "/arena/job.json").unwrap().readonly);
    assert!(!bind_of(&cand, "/arena/out").unwrap().readonly);
    // The evaluator's root is read-only, its writable space sized, its privileges few.
    assert!(cand.config.readonly_rootfs);
    for (dest, uid) in [
        ("/arena/kernels/60002/build", 60002),
        ("/arena/kernels/60001/build", 60001),
        ("/scratch/60002", 60002),
    ] {
        assert!(
            cand.config
                .tmpfs
                .iter()
                .any(|t| t.destination == dest && t.bytes > 0 && t.uid == uid),
            "{dest}: {:?}",
            cand.config.tmpfs
        );
    }
    assert_eq!(
        cand.config.capabilities,
        ["CAP_SETUID", "CAP_SETGID", "CAP_KILL"]
    );
    assert_eq!(
        cand.config.seccomp,
        arena_runtime::seccomp::Profile::Evaluator
    );
}

#[tokio::test]
async fn a_broken_kernel_fails_correctness_and_has_no_times() {
    let f = Fixture::new();
    let a = f.agent("broken", "write:correct=fail", "");
    f.run(&a, "out").await;
    let r = f.result("out", 0).unwrap();
    assert!(r.candidate.compiled() && !r.candidate.correct());
    assert!(r.candidate.performance.is_empty());
    assert!(r
        .candidate
        .correctness
        .error
        .unwrap()
        .contains("correctness failed"));
}

#[tokio::test]
async fn a_kernel_that_does_not_compile_skips_the_other_gates() {
    let f = Fixture::new();
    let a = f.agent("nocompile", "write:compile=fail", "");
    f.run(&a, "out").await;
    let r = f.result("out", 0).unwrap();
    assert!(!r.candidate.compiled());
    assert_eq!(
        r.candidate.correctness.status,
        arena_eval::record::GateStatus::Skipped
    );
}

#[tokio::test]
async fn a_symlinked_source_is_refused_and_no_evaluator_sees_it() {
    let f = Fixture::new();
    let a = f.agent("linker", "symlink", "");
    f.run(&a, "out").await;
    let r = f.result("out", 0).unwrap();
    let why = r.candidate_refused.clone().unwrap();
    assert!(why.contains("symbolic link"), "{why}");
    assert!(!r.candidate.compiled());
    assert!(f.specs("candidate").is_empty());
    assert!(!r.containers.contains_key("candidate"));
}

#[tokio::test(start_paused = true)]
async fn an_agent_past_its_timeout_is_killed_and_its_work_still_evaluated() {
    let f = Fixture::new();
    let a = f.agent("sleeper", "sleep", "timeout_s = 2\n");
    let (h, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Done);
    let r = f.result("out", 0).unwrap();
    assert!(r.containers["agent"].timed_out);
    assert!(r.candidate.correct(), "the untouched kernel is evaluated");
    assert!(messages(&h, EventKind::AgentFinished)
        .iter()
        .any(|m| m.contains("timed out after 2 s")));
}

#[tokio::test]
async fn an_agent_that_fails_still_has_its_workspace_evaluated() {
    let f = Fixture::new();
    let a = f.agent("quitter", "exit:3", "");
    f.run(&a, "out").await;
    let r = f.result("out", 0).unwrap();
    assert_eq!(r.containers["agent"].exit_code, 3);
    assert!(r.candidate.correct());
}

#[tokio::test(start_paused = true)]
async fn an_evaluator_past_its_limit_fails_the_gates_it_never_reached() {
    let f = Fixture::new();
    // 5 + 5 s of gates, 5 s to compile the original, 12 performance runs of 5 s, the floor
    // probe's 120 s and a minute of margin: 1000 s is past the limit.
    let a = f.agent("slowkernel", "write:speed=2;sleep_ms=1000000", "");
    f.run(&a, "out").await;
    let r = f.result("out", 0).unwrap();
    assert!(r.containers["candidate"].timed_out);
    let e = r.candidate.compile.error.unwrap();
    assert!(e.contains("timed out after 255 s"), "{e}");
}

#[tokio::test]
async fn the_result_names_every_digest_and_where_the_time_went() {
    let f = Fixture::new();
    let a = f.agent("fast", "write:speed=2", "");
    f.run(&a, "out").await;
    let r = f.result("out", 0).unwrap();
    let p = r.provenance.clone().unwrap();
    let lock = arena_image::Lockfile::load(&f.lock_path).unwrap();
    let rec = lock.task_image(TASKS[0]).unwrap();
    assert_eq!(Some(p.task.to_string()), rec.task_digest);
    assert_eq!(p.image, rec.manifest);
    assert_eq!(p.agent_image, Some(rec.manifest.clone()));
    assert_eq!(
        p.lockfile,
        arena_digest::Digest::of_file(&f.lock_path).unwrap().0
    );
    assert_eq!(
        p.agent,
        Some(
            arena_digest::Digest::of_file(&f.root().join("agents/fast.toml"))
                .unwrap()
                .0
        )
    );
    assert_eq!(
        p.harness,
        arena_task::harness_digest(
            &f.root().join("tasks").join(TASKS[0]),
            &["source/k.py".into()]
        )
        .unwrap()
    );
    assert_eq!(r.trust, Trust::SelfReported);
    let t = r.timings.unwrap();
    for phase in [
        t.image_s,
        t.baseline_s,
        t.workspace_s,
        t.agent_s,
        t.candidate_s,
    ] {
        assert!(phase.is_some_and(|s| s >= 0.0 && s <= t.total_s));
    }
    assert!(t.unseen_s.is_none());
    let c = &r.containers["candidate"];
    let log = f.root().join("out").join(c.stdout.as_ref().unwrap());
    assert_eq!(std::fs::read_to_string(log).unwrap(), "evaluator done\n");
}

#[tokio::test]
async fn a_task_whose_baseline_fails_is_not_scored_and_the_agent_never_runs() {
    let f = Fixture::new();
    let k = f.root().join("tasks").join(TASKS[1]).join("source/k.py");
    std::fs::write(&k, "correct=fail\n").unwrap();
    // The lock pins the task tree: re-pin it for this test.
    let mut lock = arena_image::Lockfile::load(&f.lock_path).unwrap();
    for im in &mut lock.images {
        if im.task.as_deref() == Some(TASKS[1]) {
            im.task_digest = Some(
                arena_task::task_digest(&f.root().join("tasks").join(TASKS[1]))
                    .unwrap()
                    .to_string(),
            );
        }
    }
    lock.write(&f.lock_path).unwrap();
    // The fake reads the original kernel from the image; here, the baseline reads the task's.
    f.fake.program(
        |s| s.id.ends_with("-baseline") && s.config.env.iter().any(|e| e.ends_with(TASKS[1])),
        |p| async move {
            std::fs::write(
                p.host_path("/arena/out").unwrap().join("gates"),
                "compile 0\ncorrectness 1\n",
            )
            .unwrap();
            0
        },
    );
    let a = f.agent("fast", "write:speed=2", "");
    let (h, state) = f.run(&a, "out").await;
    assert_eq!(state, RunState::Failed);
    assert!(f.result("out", 1).is_none());
    assert!(f.result("out", 0).is_some(), "the other task is unaffected");
    let errors = messages(&h, EventKind::TaskError);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("untouched task fails its own gates")),
        "{errors:?}"
    );
    let agents: Vec<_> = f
        .specs("agent")
        .into_iter()
        .filter(|s| s.config.env.iter().any(|e| e.ends_with(TASKS[1])))
        .collect();
    assert!(
        agents.is_empty(),
        "no agent time spent on an unscorable task"
    );
}

/// The evaluator container has a file system of the evaluator's own (root only, sized), its
/// HOME and Triton's cache: the root is read-only, and a derived harness compiles the task's
/// original in the evaluator. The kernels' scratches stay theirs.
#[test]
fn the_evaluator_has_a_root_only_scratch_of_its_own_beside_the_kernels() {
    use arena_eval::trusted::{BASELINE, CANDIDATE, EVALUATOR_SCRATCH};
    let cfg = super::evaluator_config(
        &[],
        Default::default(),
        vec![],
        arena_runtime::Limits::default(),
        &[BASELINE, CANDIDATE],
    );
    assert!(cfg.readonly_rootfs);
    let own = cfg
        .tmpfs
        .iter()
        .find(|t| t.destination == EVALUATOR_SCRATCH)
        .expect("the evaluator's scratch");
    assert_eq!((own.uid, own.gid, own.mode), (0, 0, 0o700));
    assert!(own.bytes > 0);
    for role in [BASELINE, CANDIDATE] {
        assert!(cfg
            .tmpfs
            .iter()
            .any(|t| t.destination == format!("/scratch/{}", role.uid) && t.uid == role.uid));
    }
    let job = arena_eval::trusted::Job::new(
        "scripts/h.py",
        &[BASELINE, CANDIDATE],
        &Default::default(),
        vec![],
    );
    assert_eq!(job.own_scratch, EVALUATOR_SCRATCH);
}

#[test]
fn a_read_only_task_tree_gives_a_workspace_the_agent_can_edit() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let task = d.path().join("task");
    std::fs::create_dir_all(task.join("source")).unwrap();
    for (name, mode) in [("source/k.py", 0o444), ("run.sh", 0o555)] {
        let p = task.join(name);
        std::fs::write(&p, "x").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let ws = d.path().join("ws");
    crate::task_run::agent::copy_task_tree(&task, &ws).unwrap();
    let mode = |p: &str| std::fs::metadata(ws.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode("source/k.py"),
        0o644,
        "writable by its owner, nothing else changed"
    );
    assert_eq!(mode("run.sh"), 0o755, "still executable");
}
