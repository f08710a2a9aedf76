//! The adversarial agents of ci/agents/adversary, each against the CPU sample tasks through a
//! real containerd and `arenactl run`: prefix_sum has a trusted harness, sum_squares is
//! self-reported. Each test asserts the outcome its agent file names, and that no score beats
//! the untouched baseline's (220), nothing on the host changed, and the run completed.
//! Needs root, containerd and runc.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::daemon::*;
use common::{repo, tier};
use serde_json::Value;

const PREFIX_SUM: &str = "python2python/arena/prefix_sum";
const SUM_SQUARES: &str = "python2python/arena/sum_squares";

fn agent(name: &str) -> String {
    format!("ci/agents/adversary/{name}.toml")
}

/// The agent `name`'s file copied into `dir`, beside `probe/<name>-probe`: its fixture
/// (`ci/fixtures/<name>-probe.c`) built static with `flags`, for the agent's `[[mount]]` of
/// `probe`.
fn agent_with_probe(dir: &Path, name: &str, flags: &[&str]) -> std::path::PathBuf {
    let probe_dir = dir.join("probe");
    std::fs::create_dir_all(&probe_dir).unwrap();
    common::build_static(
        &format!("{name}-probe.c"),
        &probe_dir.join(format!("{name}-probe")),
        flags,
    );
    let agent_file = dir.join(format!("{name}.toml"));
    std::fs::copy(repo().join(agent(name)), &agent_file).unwrap();
    agent_file
}

fn result_of<'a>(rs: &'a [Value], task: &str) -> &'a Value {
    rs.iter()
        .find(|r| r["task_id"] == task)
        .unwrap_or_else(|| panic!("no result for {task}: {rs:?}"))
}

/// One adversary test at a time: they time kernels, and several private containerds with their
/// containers sharing two cores make a self-timed harness measure the machine, not the kernel
/// (a run measured an untouched kernel at 0.59 of itself that way). Under nextest (a process
/// per test) this lock holds nothing: ci/nextest.toml runs these tests alone instead.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A kernel that changed nothing is never measured much faster (what an attack aims at); it
/// may be measured somewhat slower on a busy machine (self-timed harnesses are noisy). The
/// bars are the tier's (common::tier): generous on every push, tight in the timing tier.
fn untouched_speed(r: &Value) {
    let s = score(r);
    assert!(s.correct, "{r}");
    assert!(
        tier::result_reads_untouched(s.speedup, r),
        "speedup {} from an untouched kernel, outside {:?}: {r}",
        s.speedup,
        tier::untouched_range()
    );
}

/// Every file of the repository's tasks and agents (what the lockfile pins), with its mode.
fn snapshot() -> Vec<(std::path::PathBuf, u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = Vec::new();
    let mut stack = vec![repo().join("tasks"), repo().join("ci/agents")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                let bytes = std::fs::read(e.path()).unwrap_or_default();
                files.push((e.path(), meta.permissions().mode(), bytes));
            }
        }
    }
    files.sort();
    files
}

/// Asserts the tasks and agents are as `before` (nothing an agent did reached them).
fn unchanged(before: &[(std::path::PathBuf, u32, Vec<u8>)]) {
    let after = snapshot();
    let names = |v: &[(std::path::PathBuf, u32, Vec<u8>)]| {
        v.iter().map(|f| f.0.clone()).collect::<Vec<_>>()
    };
    assert_eq!(names(before), names(&after), "files came or went");
    for (b, a) in before.iter().zip(&after) {
        assert!(b == a, "{} changed", a.0.display());
    }
}

#[test]
fn patched_clocks_and_tampered_harnesses_change_nothing() {
    let _serial = serial();
    let before = snapshot();
    let d = Daemon::start();
    let tmp = d.dir.path();
    let (_, rs) = d.run_on(
        &agent("timer"),
        &[PREFIX_SUM, SUM_SQUARES],
        &tmp.join("timer"),
        &[],
    );
    let trusted = result_of(&rs, PREFIX_SUM);
    assert_eq!(trusted["trust"], "trusted");
    untouched_speed(trusted);
    let selfrep = result_of(&rs, SUM_SQUARES);
    let s = score(selfrep);
    assert!(s.correct && s.speedup == 0.0, "{selfrep}");
    assert_eq!(s.score, 120.0);
    assert!(
        matches!(
            s.performance_failure,
            Some(arena_report::PerfFailure::CrossCheck { .. })
        ),
        "{selfrep}"
    );
    assert_eq!(selfrep["cross_check"]["verdict"], "inconsistent");
    assert_eq!(selfrep["trust"], "self_reported_cross_checked");

    let out = tmp.join("rewrite");
    let rs = d.run_judged(
        &agent("harness_rewrite"),
        &[PREFIX_SUM, SUM_SQUARES],
        &out,
        &[],
    );
    for task in [PREFIX_SUM, SUM_SQUARES] {
        let r = result_of(&rs, task);
        // The self-timed harness is now paired with the original in one session (before,
        // timed in separate containers, CI twice measured this untouched kernel at 0.54–0.59),
        // over 6 rounds in the timing tier (Daemon::run_judged).
        untouched_speed(r);
        let logs = phase_logs(&out, task, "candidate");
        assert!(!logs.contains("ALLOWED"), "{task}: {logs}");
        for path in [
            "/task/scripts/task_runner.py",
            "/arena/trusted/evaluate.py",
            "/arena/out/gates",
            "/arena/job.json",
            "/arena/hidden/task.json",
            "/arena/harness/task/scripts/task_runner.py",
            "/usr/lib/python3.11/json/__init__.py",
        ] {
            assert!(
                logs.contains(&format!("DENIED {path}")),
                "{task}: {path} not denied: {logs}"
            );
        }
    }
    unchanged(&before);
    assert!(empty(&d.leftovers()));
}

#[test]
fn a_kernel_cannot_reach_the_original_it_is_paired_with() {
    let _serial = serial();
    let before = snapshot();
    let d = Daemon::start();
    let tmp = d.dir.path();
    let out = tmp.join("saboteur");
    let rs = d.run_judged(&agent("saboteur"), &[PREFIX_SUM, SUM_SQUARES], &out, &[]);
    for task in [PREFIX_SUM, SUM_SQUARES] {
        // The burners slow only the kernel that starts them: never faster than untouched.
        let r = result_of(&rs, task);
        let s = score(r);
        assert!(s.correct && tier::no_faster(s.speedup, r), "{task}: {r}");
    }
    let r = result_of(&rs, SUM_SQUARES);
    assert!(
        r["candidate"]["performance"][0]["pairs_ms"].is_array(),
        "{r}"
    );
    let logs = phase_logs(&out, SUM_SQUARES, "candidate");
    for path in [
        "/arena/kernels/60001/source/sum_squares.py",
        "/arena/kernels/60001/sitecustomize.py",
        "/arena/kernels/60001/build/performance_report.json",
        "/arena/kernels/60001/scripts/task_runner.py",
        "/arena/kernels/60002/scripts/task_runner.py",
        "/scratch/60001/planted",
        "/arena/kernels/60001/scripts/task_runner.py",
    ] {
        assert!(
            logs.contains(&format!("DENIED {path}")),
            "{path} not denied: {logs}"
        );
    }
    assert!(!logs.contains("ALLOWED"), "{logs}");
    // Each of the kernel's steps (compile, correctness, a performance run per round) starts
    // with nothing of its earlier steps left: no burner, no file in /tmp.
    assert!(!logs.contains("LEFTOVER FOUND"), "{logs}");
    assert_eq!(
        logs.matches("DENIED /scratch/60001/planted").count(),
        2 + Daemon::judged_perf_pairs(),
        "{logs}"
    );
    unchanged(&before);
    assert!(empty(&d.leftovers()));
}

/// A helper forked by the kernel whose first thread exits shows as a zombie and used to be
/// skipped when the kernel's user was stopped; it burns the CPU only while its kernel is
/// stopped (the original timed). Stopped with its user, it never runs then.
#[test]
fn a_helper_that_looks_like_a_zombie_is_stopped_with_its_kernel() {
    let _serial = serial();
    let before = snapshot();
    let d = Daemon::start();
    let tmp = d.dir.path();
    // The helper, built here and mounted into the agent's container, which carries it into
    // the kernel's source.
    let agent_file = agent_with_probe(tmp, "zombie", &["-O2", "-pthread"]);
    let (_, rs) = d.run_on(
        agent_file.to_str().unwrap(),
        &[PREFIX_SUM],
        &tmp.join("zombie"),
        &[],
    );
    let r = result_of(&rs, PREFIX_SUM);
    assert_eq!(r["trust"], "trusted");
    untouched_speed(r);
    unchanged(&before);
    assert!(empty(&d.leftovers()));
}

#[test]
fn wrong_outputs_fail_correctness() {
    let _serial = serial();
    let before = snapshot();
    let d = Daemon::start();
    let tmp = d.dir.path();
    // A memo keyed by the input's identity never hits (fresh inputs per call): it may pass,
    // but never faster.
    for (name, may_pass) in [
        ("reference_swap", false),
        ("deferred", false),
        ("memoize", true),
    ] {
        let (_, rs) = d.run_on(&agent(name), &[PREFIX_SUM], &tmp.join(name), &[]);
        let r = result_of(&rs, PREFIX_SUM);
        let s = score(r);
        if s.correct && may_pass {
            assert!(tier::no_faster(s.speedup, r), "{name}: {r}");
        } else {
            assert!(!s.correct, "{name}: {r}");
            assert!(s.score <= 20.0, "{name}: {r}");
        }
    }
    unchanged(&before);
}

/// On the self-reported task: the trusted ones (matmul, prefix_sum) meet the same agents
/// through the Evaluate API, whose evaluator a run's is (evaluate_api.rs), and the API takes
/// no self-reported task.
#[test]
fn zeros_and_echoed_inputs_fail_correctness_on_every_sample_task() {
    let _serial = serial();
    let before = snapshot();
    let d = Daemon::start();
    let tmp = d.dir.path();
    let tasks = [SUM_SQUARES];
    for name in ["zeros", "echo"] {
        let (_, rs) = d.run_on(&agent(name), &tasks, &tmp.join(name), &[]);
        for task in tasks {
            let r = result_of(&rs, task);
            let s = score(r);
            assert!(s.compiled, "{name} on {task}: {r}");
            assert!(!s.correct, "{name} passed {task}: {r}");
            assert_eq!(s.score, 20.0, "{name} on {task}: {r}");
        }
    }
    unchanged(&before);
    assert!(empty(&d.leftovers()));
}

#[test]
fn links_fifos_and_sparse_files_are_refused_and_the_run_completes() {
    let _serial = serial();
    let before = snapshot();
    let d = Daemon::start();
    let tmp = d.dir.path();
    let out = tmp.join("links");
    let t0 = Instant::now();
    let (_, rs) = d.run_on(&agent("report_links"), &[SUM_SQUARES], &out, &[]);
    assert!(
        t0.elapsed() < Duration::from_secs(300),
        "a FIFO held the run up"
    );
    let r = result_of(&rs, SUM_SQUARES);
    // The gates are judged by the harness's exit codes; nothing of /etc/passwd got in.
    assert!(score(r).correct, "{r}");
    assert!(files_containing(&out, b"root:x:0:0").is_empty());
    let refused = r["evaluators"]["candidate"]["reports"].to_string();
    assert!(refused.contains("refused"), "{refused}");

    let (_, rs) = d.run_on(&agent("sparse"), &[PREFIX_SUM], &tmp.join("sparse"), &[]);
    let r = result_of(&rs, PREFIX_SUM);
    let why = r["candidate_refused"].as_str().unwrap_or_default();
    assert!(why.contains("at most"), "{r}");
    assert_eq!(score(r).score, 0.0);
    unchanged(&before);
    assert!(empty(&d.leftovers()));
}

#[test]
fn writes_stop_at_each_file_system_and_syscalls_are_filtered() {
    let _serial = serial();
    let before = snapshot();
    let d = Daemon::start();
    let tmp = d.dir.path();
    let out = tmp.join("fill");
    let rs = d.run_judged(
        &agent("disk_fill"),
        &[PREFIX_SUM, SUM_SQUARES],
        &out,
        &["--workspace-size", "64MiB"],
    );
    for task in [PREFIX_SUM, SUM_SQUARES] {
        let r = result_of(&rs, task);
        // Filling takes the kernel's process seconds: outside the timed calls of the trusted
        // evaluator, but inside the self-reported performance command, whose reports the
        // cross-check may then refuse. Either way, no gain.
        let s = score(r);
        assert!(s.correct && tier::no_faster(s.speedup, r), "{task}: {r}");
        let kept = out
            .join("tasks")
            .join(task.replace('/', "__"))
            .join("r0/workspace.kept");
        let err = std::fs::read_to_string(kept.join("fill.err")).unwrap();
        assert!(err.contains("No space left"), "{task}: {err}");
        let err = std::fs::read_to_string(kept.join("rootfill.err")).unwrap();
        assert!(err.contains("Read-only file system"), "{task}: {err}");
        let err = std::fs::read_to_string(kept.join("tmpfill.err")).unwrap();
        assert!(err.contains("No space left"), "{task}: {err}");
        // The kernel's writes: each stops at a sized tmpfs, the read-only root, or permissions.
        let logs = phase_logs(&out, task, "candidate");
        assert!(!logs.contains("FILLED"), "{task}: {logs}");
        assert!(
            logs.contains("STOPPED / Read-only file system"),
            "{task}: {logs}"
        );
        assert!(logs.contains("No space left"), "{task}: {logs}");
    }

    // The probe, built here and mounted into the agent's container.
    let agent_file = agent_with_probe(tmp, "seccomp", &["-O2"]);
    let out = tmp.join("seccomp");
    d.run_on(agent_file.to_str().unwrap(), &[PREFIX_SUM], &out, &[]);
    let probe = std::fs::read_to_string(
        out.join("tasks")
            .join(PREFIX_SUM.replace('/', "__"))
            .join("r0/workspace.kept/probe.txt"),
    )
    .unwrap();
    let lines: Vec<(&str, &str)> = probe.lines().filter_map(|l| l.split_once(' ')).collect();
    assert_eq!(lines.len(), 13, "{probe}");
    for (name, errno) in lines {
        let want = if name == "clone3" { "38" } else { "1" };
        assert_eq!(errno, want, "{name} was not refused: {probe}");
    }
    unchanged(&before);
    assert!(empty(&d.leftovers()));
}

#[test]
fn a_killed_client_leaves_nothing_running_past_its_timeout() {
    let _serial = serial();
    let d = Daemon::start();
    let tmp = d.dir.path();
    let out = tmp.join("sleeper");
    // The sleeper with a 12 s timeout: with its own 3 s, a busy CI machine reported the agent's
    // start to the client after the runner had already begun removing it at the timeout, and
    // the client died between removing the container and its snapshot (seen once).
    const TIMEOUT_S: u64 = 12;
    let sleeper = tmp.join("sleeper.toml");
    let text = std::fs::read_to_string(repo().join(agent("sleeper"))).unwrap();
    assert!(text.contains("timeout_s = 3\n"));
    std::fs::write(
        &sleeper,
        text.replace("timeout_s = 3\n", &format!("timeout_s = {TIMEOUT_S}\n")),
    )
    .unwrap();
    let mut args = d.run_args_all(sleeper.to_str().unwrap(), &out);
    args.extend(["--tasks".to_string(), PREFIX_SUM.to_string()]);
    let progress = tmp.join("sleeper.progress");
    // Killed, it cannot remove its temporary directories (its runner's socket, its
    // containers' FIFOs): they go in this test's directory, not the machine's /tmp.
    let scratch = tmp.join("tmpdir");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut child = arenactl()
        .args(&args)
        .env("TMPDIR", &scratch)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&progress).unwrap())
        .spawn()
        .unwrap();
    // Kill the client (SIGKILL) while the agent sleeps.
    let t0 = Instant::now();
    while !std::fs::read_to_string(&progress)
        .unwrap_or_default()
        .contains("agent adversary-sleeper started")
    {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the agent never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The event comes before the container is made: wait for its task to run, or the kill
    // may land between the snapshot and the container (a snapshot and a lease left, no
    // container: seen once).
    while !agent_task_running(&d.socket) {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the agent's task never ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let running = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    // With nobody watching, the watchdog in the container ends the agent 4 s past its
    // deadline (the deadline began a moment before the task was seen running, and the
    // polling adds at most 0.2 s): within 5 s in the timing tier, twice the expected time on
    // every push (common::tier).
    let margin = tier::watchdog_margin_s(TIMEOUT_S);
    while agent_task_running(&d.socket) {
        assert!(
            running.elapsed() < Duration::from_secs(TIMEOUT_S + margin),
            "the agent ran more than {margin} s past its deadline with its client dead"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "the agent ended {:.1} s after it was seen running (timeout {TIMEOUT_S} s)",
        running.elapsed().as_secs_f64()
    );
    // gc removes its container at once: its owner is dead.
    let o = arenactl()
        .args(["gc", "--json", "--containerd", &d.socket])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let removed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        removed["containers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|id| id.as_str().unwrap().ends_with("-agent")),
        "{removed}"
    );
    // The same command resumes: the task run completes once.
    let o = arenactl().args(&args).arg("--json").output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let rs = results(&out);
    assert_eq!(rs.len(), 1);
    assert!(rs[0]["containers"]["agent"]["timed_out"].as_bool().unwrap());
    assert!(empty(&d.leftovers()));
}

#[test]
fn gc_alone_does_not_touch_what_a_live_run_holds() {
    let _serial = serial();
    let d = Daemon::start();
    let tmp = d.dir.path();
    let out = tmp.join("live");
    let mut args = d.run_args_all(&agent("sleeper"), &out);
    args.extend(["--tasks".to_string(), PREFIX_SUM.to_string()]);
    let mut child = arenactl()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        let o = arenactl()
            .args(["gc", "--json", "--containerd", &d.socket])
            .output()
            .unwrap();
        let removed: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            removed["containers"].as_array().unwrap().is_empty(),
            "gc removed a live run's container: {removed}"
        );
        if child.try_wait().unwrap().is_some() || t0.elapsed() > Duration::from_secs(8) {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let st = child.wait().unwrap();
    assert!(st.success());
    let _ = Path::new(&out);
}
