//! The Evaluate API against a real `arenactl runner serve` and a real containerd: the
//! adversarial suite's kernel attacks (ci/agents/adversary, each agent's script run on a copy
//! of the task's source) get the outcome they get in runs (adversaries.rs); one candidate's
//! leftovers never reach the next one's evaluation in the same warm evaluator; a full queue
//! refuses at once and every request gets exactly one answer; a deadline stops an evaluation
//! and the next request gets a fresh evaluator; a runner that ends leaves nothing in
//! containerd. Needs root, containerd and runc.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arena_client::{ClientError, Evaluate, Evaluation, Runner};
use common::daemon::*;
use common::served::{rt, Served};
use common::{repo, tier};

const PREFIX_SUM: &str = "python2python/arena/prefix_sum";
const MATMUL: &str = "python2python/arena/matmul";
const LOCK: &str = "lockfiles/cpu.lock";

/// One test at a time: they time kernels on two cores. Under nextest (a process per test) this
/// lock holds nothing: ci/nextest.toml runs these tests alone instead.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The task's source file after an adversary agent's script has run on a copy of it (the
/// script appends to `/workspace/source/<kernel>.py`; run here with the workspace a temporary
/// directory).
fn attacked(agent: &str, task: &str) -> Vec<u8> {
    let a =
        arena_run::Agent::load(&repo().join(format!("ci/agents/adversary/{agent}.toml"))).unwrap();
    assert_eq!(a.command[..2], ["sh", "-c"], "{agent}");
    let script = &a.command[2];
    let ws = tempfile::tempdir().unwrap();
    let k = Path::new(task).file_name().unwrap().to_str().unwrap();
    let src = format!("source/{k}.py");
    std::fs::create_dir_all(ws.path().join("source")).unwrap();
    std::fs::write(ws.path().join(&src), original(task)).unwrap();
    let script = script.replace("/workspace", ws.path().to_str().unwrap());
    let o = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("ARENA_TASK_ID", task)
        .output()
        .unwrap();
    assert!(o.status.success(), "{agent}: {}", show(&o));
    std::fs::read(ws.path().join(&src)).unwrap()
}

/// ci/fixtures/ipc-probe.c, built static here, as Python source: `_ipc(mode)` writes the
/// probe into the kernel's scratch (its HOME), runs it with `mode` and returns its lines (none
/// if it could not run).
fn ipc_probe() -> String {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("ipc-probe");
    common::build_static("ipc-probe.c", &bin, &["-Os"]);
    let o = std::process::Command::new("base64")
        .args(["-w", "0"])
        .arg(&bin)
        .output()
        .unwrap();
    assert!(o.status.success());
    let b64 = String::from_utf8(o.stdout).unwrap();
    format!(
        r#"
def _ipc(mode):
    import base64, os, subprocess
    p = os.path.join(os.environ.get("HOME", "/nonexistent"), "ipc-probe-" + mode)
    try:
        with open(p, "wb") as f:
            f.write(base64.b64decode("{b64}"))
        os.chmod(p, 0o700)
        return subprocess.run([p, mode], capture_output=True, text=True, timeout=20).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return []
    finally:
        try:
            os.unlink(p)
        except OSError:
            pass

"#
    )
}

/// The task's own kernel source, untouched.
fn original(task: &str) -> Vec<u8> {
    let k = Path::new(task).file_name().unwrap().to_str().unwrap();
    std::fs::read(repo().join(format!("tasks/{task}/source/{k}.py"))).unwrap()
}

fn solution(task: &str) -> Vec<u8> {
    let k = Path::new(task).file_name().unwrap().to_str().unwrap();
    std::fs::read(repo().join(format!("ci/solutions/{task}/{k}.py"))).unwrap()
}

/// A request for `task` with `file` as its kernel, timed with 3 pairs (what these tests check
/// reads the same with fewer pairs, at a third of the time).
fn request(task: &str, file: Vec<u8>) -> Evaluate {
    let k = Path::new(task).file_name().unwrap().to_str().unwrap();
    Evaluate::new(repo().join(LOCK), task)
        .file(format!("source/{k}.py"), file)
        .trusted_pairs(3)
}

async fn eval(r: &Runner, task: &str, file: Vec<u8>) -> Evaluation {
    r.evaluate(request(task, file)).await.unwrap()
}

/// As adversaries.rs: a kernel that changed nothing is never measured much faster (by the
/// tier's bars, common::tier).
fn untouched(e: &Evaluation) {
    let s = &e.score;
    assert!(s.correct, "{}", e.result_json);
    assert!(
        tier::result_reads_untouched(s.speedup, &result_value(e)),
        "speedup {} from an untouched kernel, outside {:?}: {}",
        s.speedup,
        tier::untouched_range(),
        e.result_json
    );
}

/// An evaluation's task result, as JSON.
fn result_value(e: &Evaluation) -> serde_json::Value {
    serde_json::from_str(&e.result_json).expect("result JSON")
}

fn fails_correctness(e: &Evaluation) {
    assert!(e.score.compiled && !e.score.correct, "{}", e.result_json);
    assert_eq!(e.score.score, 20.0, "{}", e.result_json);
    assert!(
        e.result.candidate.correctness.error.is_some(),
        "the reason is named: {}",
        e.result_json
    );
}

/// A kernel that is right unless it finds what an earlier candidate left: its files in /tmp,
/// /dev/shm or its scratch, System V segments of its user, processes of its user other than
/// itself.
const DETECTOR: &str = include_str!("../fixtures/leftover_detector.py");

#[test]
fn the_adversarial_candidates_get_the_outcomes_they_get_in_runs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let d = Daemon::start();
    let s = Served::start(&d, &["--eval-idle", "600"]);
    rt().block_on(async {
        let r = Runner::connect(&s.addr).await.unwrap();
        // The reference solution is faster; an untouched kernel is as fast as the original.
        let fast = eval(&r, PREFIX_SUM, solution(PREFIX_SUM)).await;
        assert!(
            fast.score.correct && tier::reads_faster(fast.score.speedup, 1.1),
            "{}",
            fast.result_json
        );
        assert_eq!(fast.result.trust, arena_run::result::Trust::Trusted);
        // The request's pairs timed it (3, not the default's 10).
        for c in &fast.result.candidate.performance {
            assert_eq!(c.pairing.pairs_ms.as_ref().map(Vec::len), Some(3));
        }
        let p = fast.result.provenance.as_ref().unwrap();
        assert!(p.candidate.is_some() && p.agent.is_none() && p.evaluator.is_some());
        // Clocks patched, the harness and the evaluator written to, a way out of the fork
        // of the zygote looked for: nothing changes.
        for agent in ["timer", "harness_rewrite", "fork_escape"] {
            let e = eval(&r, PREFIX_SUM, attacked(agent, PREFIX_SUM)).await;
            assert!(e.warm, "{agent}: the evaluator stays warm");
            untouched(&e);
        }
        // A swapped reference, zeros, an echo, memoized or deferred outputs: correctness fails,
        // with the reason named.
        for agent in ["reference_swap", "zeros", "echo", "memoize", "deferred"] {
            fails_correctness(&eval(&r, PREFIX_SUM, attacked(agent, PREFIX_SUM)).await);
        }
        for agent in ["zeros", "echo"] {
            fails_correctness(&eval(&r, MATMUL, attacked(agent, MATMUL)).await);
        }
        // What the saboteur and the leftovers agent leave (burners, a sleeper in a session
        // of its own, files in the scratch, /dev/shm and /tmp, zombies) is gone before the
        // next candidate of the same warm evaluator loads: the detector finds nothing (it
        // would answer wrong), and its speed is an untouched kernel's. (matmul's requests
        // took the one GPU slot: prefix_sum's evaluator is a new one from here.)
        let sab = eval(&r, PREFIX_SUM, attacked("saboteur", PREFIX_SUM)).await;
        // Its burners slow only itself (they are stopped with it): never faster than
        // untouched, as in runs.
        assert!(
            sab.score.correct && tier::no_faster(sab.score.speedup, &result_value(&sab)),
            "{}",
            sab.result_json
        );
        let left = eval(&r, PREFIX_SUM, attacked("leftovers", PREFIX_SUM)).await;
        assert!(
            left.score.correct && tier::no_faster(left.score.speedup, &result_value(&left)),
            "{}",
            left.result_json
        );
        let ipc = ipc_probe();
        let mut detector = ipc.clone().into_bytes();
        detector.extend(original(PREFIX_SUM));
        detector.extend_from_slice(DETECTOR.as_bytes());
        let after = eval(&r, PREFIX_SUM, detector.clone()).await;
        assert!(
            after.warm,
            "the saboteur's evaluator served the next request"
        );
        untouched(&after);
        // Marks on the scratch itself, with nothing in it (a mode, times): the next kernel of
        // the user would find them, or fail to enter it (with a mode of 0). (An extended
        // attribute takes a tmpfs's inode space: the leftovers agent leaves one.)
        let mut marks = original(PREFIX_SUM);
        marks.extend_from_slice(
            br#"

def _mark():
    import os
    home = os.environ["HOME"]
    for n in os.listdir(home):
        os.unlink(os.path.join(home, n))
    os.utime(home, (1, 1))
    os.chmod(home, 0o755)


_mark()
"#,
        );
        let marked = eval(&r, PREFIX_SUM, marks).await;
        assert!(marked.score.correct, "{}", marked.result_json);
        let after = eval(&r, PREFIX_SUM, detector.clone()).await;
        assert!(after.warm, "the marks were not removed where they are");
        untouched(&after);
        // What no directory lists (ci/fixtures/ipc-probe.c): a System V segment given to the
        // original's user (its creator keeps the use of it), and a POSIX message queue, which
        // the evaluator's seccomp profile must refuse (the kernel answers wrong unless the
        // probe reports exactly that). The testbase has no ctypes, so the candidate user's
        // cleaner cannot remove the segment; root finds it by its creator and the evaluator
        // retires: the detector's evaluator is a new one, where it finds nothing either.
        let mut ipc_kernel =
            format!("{ipc}\n_IPC = [l for l in _ipc(\"leave\") if l]\n\n").into_bytes();
        ipc_kernel.extend(original(PREFIX_SUM));
        ipc_kernel.extend_from_slice(
            br#"

_as_left = prefix_sum


def prefix_sum(xs):
    out = _as_left(xs)
    want = ["shmget 0", "shm_give_away 0", "mq_open 1", "mqueue_file 2"]
    return out if _IPC == want else [v + 1 for v in out]
"#,
        );
        let ipc_left = eval(&r, PREFIX_SUM, ipc_kernel).await;
        assert!(ipc_left.score.correct, "{}", ipc_left.result_json);
        let after = eval(&r, PREFIX_SUM, detector).await;
        assert!(
            !after.warm,
            "an evaluator whose candidate left a System V segment served the next request"
        );
        untouched(&after);
        // Paths that are not the task's agent files are refused, naming them.
        let bad = r
            .evaluate(
                Evaluate::new(repo().join(LOCK), PREFIX_SUM)
                    .file("scripts/task_runner.py", b"x".to_vec()),
            )
            .await
            .err()
            .unwrap();
        assert!(
            bad.to_string()
                .contains("not one of the task's agent files"),
            "{bad}"
        );
        let self_reported = r
            .evaluate(request("python2python/arena/sum_squares", b"x".to_vec()))
            .await
            .err()
            .unwrap();
        assert!(
            self_reported.to_string().contains("no trusted harness"),
            "{self_reported}"
        );
        let no_pairs = r
            .evaluate(request(PREFIX_SUM, solution(PREFIX_SUM)).trusted_pairs(0))
            .await
            .err()
            .unwrap();
        assert!(
            no_pairs
                .to_string()
                .contains("trusted_pairs: must be 1 to 100"),
            "{no_pairs}"
        );
        let too_many = r
            .evaluate(request(PREFIX_SUM, solution(PREFIX_SUM)).checked_calls(4097))
            .await
            .err()
            .unwrap();
        assert!(
            too_many
                .to_string()
                .contains("checked_calls: must be 0 (every output) to 4096"),
            "{too_many}"
        );
        // A request's own checked calls reach its warm evaluator, which takes them (a CPU
        // evaluation checks every output whatever the number).
        let every = r
            .evaluate(request(PREFIX_SUM, original(PREFIX_SUM)).checked_calls(0))
            .await
            .unwrap();
        untouched(&every);
    });
    s.stop();
    assert!(empty(&d.leftovers()), "{}", d.leftovers());
}

#[test]
fn a_full_queue_refuses_at_once_and_every_request_gets_exactly_one_answer() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let d = Daemon::start();
    let s = Served::start(&d, &["--eval-queue", "16"]);
    let zeros = attacked("zeros", PREFIX_SUM);
    let (answers, busy) = rt().block_on(async {
        let r = Runner::connect(&s.addr).await.unwrap();
        // A warm evaluator first, so that the line is what is measured.
        fails_correctness(&eval(&r, PREFIX_SUM, zeros.clone()).await);
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..120 {
            let (r, z) = (r.clone(), zeros.clone());
            calls.spawn(async move {
                let req = request(PREFIX_SUM, z).request_id(format!("req-{i}"));
                (i, r.evaluate(req).await)
            });
        }
        let (mut answers, mut busy) = (Vec::new(), 0);
        while let Some(j) = calls.join_next().await {
            match j.unwrap() {
                (i, Ok(e)) => answers.push((i, e)),
                (_, Err(ClientError::Busy(m))) => {
                    assert!(m.contains("the limit is 16"), "{m}");
                    busy += 1;
                }
                (i, Err(e)) => panic!("request {i}: {e}"),
            }
        }
        (answers, busy)
    });
    assert_eq!(answers.len() + busy, 120, "one answer per request");
    assert!(
        answers.len() >= 16 && busy > 0,
        "{} answered, {busy} busy",
        answers.len()
    );
    let mut ids: Vec<&str> = answers
        .iter()
        .map(|(_, e)| e.evaluation_id.as_str())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), answers.len(), "no evaluation answered twice");
    for (i, e) in &answers {
        assert_eq!(e.request_id, format!("req-{i}"));
        fails_correctness(e);
        // Each evaluation drew its own secret seed.
        assert!(e.result.evaluators["candidate"].seed.is_some());
    }
    let seeds: std::collections::BTreeSet<String> = answers
        .iter()
        .map(|(_, e)| format!("{:?}", e.result.evaluators["candidate"].seed))
        .collect();
    assert_eq!(seeds.len(), answers.len());
    s.stop();
    assert!(empty(&d.leftovers()), "{}", d.leftovers());
}

#[test]
fn a_deadline_stops_the_evaluation_and_the_next_request_gets_a_fresh_evaluator() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let d = Daemon::start();
    let s = Served::start(&d, &[]);
    rt().block_on(async {
        let r = Runner::connect(&s.addr).await.unwrap();
        let warmup = eval(&r, PREFIX_SUM, attacked("zeros", PREFIX_SUM)).await;
        assert!(!warmup.warm);
        // The solution's gates take a second or more: a tenth of one is too little.
        let t0 = Instant::now();
        let e = r
            .evaluate(request(PREFIX_SUM, solution(PREFIX_SUM)).timeout(Duration::from_millis(100)))
            .await
            .err()
            .unwrap();
        assert!(
            matches!(&e, ClientError::Status(st) if st.code() == tonic::Code::DeadlineExceeded),
            "{e}"
        );
        assert!(t0.elapsed() < Duration::from_secs(40), "{:?}", t0.elapsed());
        let next = eval(&r, PREFIX_SUM, solution(PREFIX_SUM)).await;
        assert!(
            !next.warm,
            "never the evaluator that may still run the other candidate"
        );
        assert!(
            next.score.correct && tier::reads_faster(next.score.speedup, 1.1),
            "{}",
            next.result_json
        );
    });
    // The CLI: the same call, text and JSON.
    let o = arenactl()
        .args([
            "eval",
            "--runner",
            &s.addr,
            "--image-lock",
            LOCK,
            "--task",
            PREFIX_SUM,
            "--trusted-pairs",
            "2",
            "--json",
        ])
        .arg("--candidate")
        .arg(format!(
            "source/prefix_sum.py={}",
            solution_path(PREFIX_SUM).display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["correct"], true, "{v}");
    assert_eq!(v["warm"], true, "{v}");
    assert_eq!(v["result"]["schema"], "arena.task_result/v2");
    assert_eq!(v["trust"], "trusted", "{v}");
    assert!(v["performance_failure"].is_null(), "{v}");
    // --trusted-pairs reaches the evaluator: every case holds that many pairs.
    let cases = v["result"]["candidate"]["performance"].as_array().unwrap();
    assert!(!cases.is_empty(), "{v}");
    for c in cases {
        assert_eq!(c["pairs_ms"].as_array().map(Vec::len), Some(2), "{c}");
    }
    s.stop();
    assert!(empty(&d.leftovers()), "{}", d.leftovers());
}

fn solution_path(task: &str) -> PathBuf {
    let k = Path::new(task).file_name().unwrap().to_str().unwrap();
    repo().join(format!("ci/solutions/{task}/{k}.py"))
}
