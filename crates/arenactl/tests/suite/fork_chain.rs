//! ci/agents/adversary/fork_chain.toml through a real containerd: a kernel whose fork chains
//! (ci/fixtures/fork_chain-probe.c) burn the CPU while the original is timed, in a run and in a
//! warm evaluator of the Evaluate API. Its chains are stopped and killed with its user, so it
//! gains nothing, and the next candidate of the same warm evaluator finds none of them. (With
//! freeze and kill by pid from a listing of /proc, fork_chains.rs of arena-eval found chains
//! running after 18 of 20 freezes.) Needs root, containerd, runc and gcc.

use crate::common;

use std::path::{Path, PathBuf};

use arena_client::{Evaluate, Runner};
use common::daemon::*;
use common::repo;
use common::served::{rt, Served};

const PREFIX_SUM: &str = "python2python/arena/prefix_sum";
const AGENT: &str = "ci/agents/adversary/fork_chain.toml";

/// One test at a time: they time kernels on two cores (ci/nextest.toml runs them alone too).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The agent's file copied into `dir`, beside `probe/fork_chain-probe` (built static, for its
/// `[[mount]]` of `probe`).
fn agent_with_probe(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("probe")).unwrap();
    common::build_static(
        "fork_chain-probe.c",
        &dir.join("probe/fork_chain-probe"),
        &["-O2"],
    );
    let agent = dir.join("fork_chain.toml");
    std::fs::copy(repo().join(AGENT), &agent).unwrap();
    agent
}

/// prefix_sum's kernel as the agent leaves it: its script run here on a copy of the task's
/// source, with the agent's mounts at `dir`.
fn attacked(dir: &Path) -> Vec<u8> {
    let agent = arena_run::Agent::load(&agent_with_probe(dir)).unwrap();
    let ws = dir.join("workspace");
    std::fs::create_dir_all(ws.join("source")).unwrap();
    let src = ws.join("source/prefix_sum.py");
    std::fs::copy(
        repo().join(format!("tasks/{PREFIX_SUM}/source/prefix_sum.py")),
        &src,
    )
    .unwrap();
    let script = agent.command[2]
        .replace("/workspace", ws.to_str().unwrap())
        .replace("/probe", dir.join("probe").to_str().unwrap());
    let o = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    std::fs::read(&src).unwrap()
}

/// Every gate passes (the chains are stopped with their kernel, so its freeze holds) and the
/// speedup is not inflated: the chains run only while their own kernel runs. The tier's bars
/// (common::tier::no_faster): on every push not above 2 in every session, as a busy machine's
/// load lands on a session or two (a warm evaluator read 2.15, its sessions about 1.0, 2.5
/// and 4.2, beside a release build). With freezing by pid from a listing, the chains escaped and
/// burned while the original was timed: a warm evaluator read 2.99, and a run's performance
/// gate failed.
fn gains_nothing(correct: bool, speedup: f64, result: &serde_json::Value) {
    assert!(correct, "{result}");
    assert!(
        speedup > 0.0 && common::tier::no_faster(speedup, result),
        "speedup {speedup}: {result}"
    );
}

#[test]
fn fork_chains_burning_while_the_original_is_timed_gain_nothing() {
    let _serial = serial();
    let d = Daemon::start();
    let tmp = d.dir.path();
    let agent = agent_with_probe(tmp);
    let (_, rs) = d.run_on(
        agent.to_str().unwrap(),
        &[PREFIX_SUM],
        &tmp.join("run"),
        &[],
    );
    let r = rs
        .iter()
        .find(|r| r["task_id"] == PREFIX_SUM)
        .unwrap_or_else(|| panic!("no result: {rs:?}"));
    assert_eq!(r["trust"], "trusted", "{r}");
    let s = score(r);
    eprintln!("fork chains in a run: speedup {}", s.speedup);
    assert!(s.compiled, "{r}");
    gains_nothing(s.correct, s.speedup, r);
    assert!(empty(&d.leftovers()));
}

#[test]
fn fork_chains_are_gone_before_the_next_candidate_of_a_warm_evaluator() {
    let _serial = serial();
    let d = Daemon::start();
    let kernel = attacked(&d.dir.path().join("attack"));
    // Right unless it finds a process of its user other than itself.
    let mut detector =
        std::fs::read(repo().join(format!("tasks/{PREFIX_SUM}/source/prefix_sum.py"))).unwrap();
    detector.extend_from_slice(
        br#"

def _others():
    import os
    me = os.getuid()
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != os.getpid():
            try:
                if os.stat("/proc/" + p).st_uid == me:
                    found.append(p)
            except OSError:
                pass
    return found


_LEFT = _others()
_honest = prefix_sum


def prefix_sum(xs):
    out = _honest(xs)
    return [v + 1 for v in out] if _LEFT else out
"#,
    );
    let s = Served::start(&d, &["--eval-idle", "600"]);
    rt().block_on(async {
        let r = Runner::connect(&s.addr).await.unwrap();
        let req = |file: Vec<u8>| {
            Evaluate::new(repo().join("lockfiles/cpu.lock"), PREFIX_SUM)
                .file("source/prefix_sum.py", file)
                .trusted_pairs(3)
        };
        let chains = r.evaluate(req(kernel)).await.unwrap();
        eprintln!(
            "fork chains in a warm evaluator: speedup {}",
            chains.score.speedup
        );
        let result: serde_json::Value =
            serde_json::from_str(&chains.result_json).expect("result JSON");
        gains_nothing(chains.score.correct, chains.score.speedup, &result);
        let next = r.evaluate(req(detector)).await.unwrap();
        assert!(
            next.warm,
            "the fork chains' evaluator retired: its kill left processes"
        );
        assert!(
            next.score.correct,
            "the next candidate found the chains: {}",
            next.result_json
        );
    });
    s.stop();
    assert!(empty(&d.leftovers()), "{}", d.leftovers());
}
