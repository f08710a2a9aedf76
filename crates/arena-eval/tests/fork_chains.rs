//! Fork chains against the evaluator's freeze and kill (trusted/arena_trusted/jail.py): eight
//! chains of processes that each fork a child and exit at once, under a subreaper that ignores
//! SIGCHLD, in C (ci/fixtures/fork_chain-probe.c) and in pure Python (ci/fixtures/fork_chain.py).
//! Over 20 trials each, no freeze may say the user is stopped while a chain still runs, and no
//! kill may say the user is gone while one survives. With freeze and kill_all signalling by pid
//! from a listing of /proc (arena before 2026-12-02) 18 of 20 freezes and 18 of 20 kills left
//! chains running, in C and in Python alike. The driver runs as the first process of a pid
//! namespace of its own, as the evaluator does in its container.
//! Needs root (the attackers take a user of their own), gcc and `unshare`.

use std::path::{Path, PathBuf};
use std::process::Command;

const TRIALS: &str = "20";
const CHAINS: &str = "8";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// fork_chains.py's counts for `attacker` run as `uid`.
fn trials(uid: u32, attacker: &[&str]) -> serde_json::Value {
    let evaluator = concat!(env!("CARGO_MANIFEST_DIR"), "/trusted/arena_trusted");
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fork_chains.py");
    let o = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "python3", "-I", "-B"])
        .args([driver, evaluator, &uid.to_string(), TRIALS, CHAINS])
        .args(attacker)
        .output()
        .expect("unshare");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

fn assert_held(counts: &serde_json::Value, what: &str) {
    eprintln!("{what}: {counts}");
    for field in [
        "freeze_escapes",
        "kill_survivors",
        "freeze_refused",
        "kill_refused",
    ] {
        assert_eq!(counts[field], 0, "{what}: {field}: {counts}");
    }
}

#[test]
fn a_fork_chain_in_c_is_frozen_and_killed_whole() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("fork_chain-probe");
    let st = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(repo().join("ci/fixtures/fork_chain-probe.c"))
        .status()
        .expect("gcc");
    assert!(st.success(), "gcc builds fork_chain-probe.c");
    // The attacker's user must reach its own program.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_held(&trials(60091, &[bin.to_str().unwrap()]), "C");
}

#[test]
fn a_fork_chain_in_python_is_frozen_and_killed_whole() {
    let script = repo().join("ci/fixtures/fork_chain.py");
    let script = script.canonicalize().unwrap();
    assert_held(
        &trials(60092, &["python3", "-I", "-S", script.to_str().unwrap()]),
        "Python",
    );
}
