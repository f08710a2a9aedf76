//! A run whose client dies at every point of it: `arenactl run` killed with SIGKILL
//! by arena_run::crash's points (`ARENA_CRASH_AT`): while each container runs, once each has
//! ended, between a result's complete temporary file and its rename, and before the run's
//! record and results are in place; then containerd restarted while an agent runs. After each,
//! the same command goes on, and at the end every task run has its result exactly once, no
//! file of the run is half written, and nothing of the run is left in containerd or mounted.
//! Needs root, containerd and runc.

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::*;
use common::{files_below, repo};

const TASKS: [&str; 2] = [
    "python2python/arena/prefix_sum", // trusted: baseline, agent, candidate, unseen
    "python2python/arena/sum_squares", // self-reported: its unseen evaluations per kernel
];

/// The points, in the order a run reaches them: prefix_sum's phases and its result, then
/// sum_squares' unseen evaluations, then the run's results. Each is reached by the command
/// that follows the one killed before it (which redoes the task run it interrupted).
const POINTS: [&str; 14] = [
    "write:run.json",
    "during:baseline",
    "ended:baseline",
    "during:agent",
    "ended:agent",
    "during:candidate",
    "ended:candidate",
    "during:unseen",
    "ended:unseen",
    "write:result.json",
    "during:unseen-original",
    "ended:unseen-original",
    "ended:unseen-optimized",
    "write:results.json",
];

/// An agent that changes nothing, still running when `during:agent` fires (once its process
/// has started) and while containerd restarts under it.
const SLOW_NOOP: &str = r#"name = "slow-noop"
image = "task"
command = ["sh", "-c", "sleep 2"]
network = "none"
timeout_s = 60
"#;

fn hidden_set(dir: &Path) -> std::path::PathBuf {
    let hidden = dir.join("hidden");
    let o = arenactl()
        .args(["unseen", "generate", "--tasks", "tasks", "--seed", "5"])
        .args(["--per-task", "2", "--out"])
        .arg(&hidden)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    hidden
}

/// What the run left: containerd's containers, snapshots and leases, mounts below `out`, and
/// temporary files of atomic writes (a half-written file is one of those, never a result).
fn assert_nothing_left(d: &Daemon, out: &Path) {
    let left = d.leftovers();
    assert!(empty(&left), "left in containerd: {left}");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let under = format!(" {}", out.display());
    assert!(
        !mounts.lines().any(|m| m.contains(&under)),
        "mounted below the run: {mounts}"
    );
    let temporary: Vec<_> = files_below(out)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(".tmp")
        })
        .collect();
    assert!(temporary.is_empty(), "half-written files: {temporary:?}");
}

/// Every task run once, each result whole and complete (its unseen part included).
fn assert_complete(out: &Path) {
    let rs = results(out);
    assert_eq!(rs.len(), TASKS.len(), "{rs:?}");
    assert_eq!(
        task_runs(&rs).len(),
        TASKS.len(),
        "a task run twice: {rs:?}"
    );
    for r in &rs {
        assert!(r["unseen"]["set_digest"].is_string(), "{r}");
        let dir = out
            .join("tasks")
            .join(r["task_id"].as_str().unwrap().replace('/', "__"))
            .join("r0/result.json");
        arena_run::result::parse_result(
            serde_json::from_slice(&std::fs::read(&dir).unwrap()).unwrap(),
        )
        .unwrap();
    }
}

fn ctr_answers(socket: &str) -> bool {
    Command::new("ctr")
        .args(["--address", socket, "version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Only the daemon, as a restart would: its shims (the running containers) live on.
fn restart_containerd(d: &Daemon) {
    let dir = d.dir.path().join("ctd");
    let pid: i32 = std::fs::read_to_string(dir.join("containerd.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    while Path::new(&format!("/proc/{pid}")).exists() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = Command::new("bash")
        .arg(repo().join("ci/containerd.sh"))
        .arg("start")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let t0 = Instant::now();
    while !ctr_answers(&d.socket) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "containerd restarts"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_client_killed_at_every_point_and_a_containerd_restart_lose_nothing() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let hidden = hidden_set(tmp);
    let agent = tmp.join("slow-noop.toml");
    std::fs::write(&agent, SLOW_NOOP).unwrap();
    let args = |out: &Path| {
        let mut a = d.run_args_timed(agent.to_str().unwrap(), out);
        a.extend(["--tasks", TASKS[0], TASKS[1]].map(String::from));
        a.extend(["--trusted-pairs", "1", "--perf-pairs", "1", "--unseen"].map(String::from));
        a.push(hidden.display().to_string());
        a
    };

    let out = tmp.join("crashed");
    for point in POINTS {
        let o = arenactl()
            .args(args(&out))
            .env(arena_run::crash::CRASH_AT, point)
            .output()
            .unwrap();
        assert_eq!(
            o.status.signal(),
            Some(9),
            "{point}: the run was not killed there (never reached?)\n{}",
            show(&o)
        );
    }
    let o = arenactl().args(args(&out)).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_complete(&out);
    assert_nothing_left(&d, &out);

    // containerd restarted while an agent runs: the client fails or goes on; either way the
    // same command then completes the run.
    let out = tmp.join("restarted");
    let client = arenactl()
        .args(args(&out))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !agent_task_running(&d.socket) {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the agent never ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    restart_containerd(&d);
    let first = client.wait_with_output().unwrap();
    eprintln!(
        "the client across containerd's restart: {:?}\n{}",
        first.status,
        String::from_utf8_lossy(&first.stderr)
    );
    let o = arenactl().args(args(&out)).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_complete(&out);
    assert_nothing_left(&d, &out);
}
