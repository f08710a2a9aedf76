//! The real Claude Code CLI as an agent, end to end: its pinned image (the `cpu-claude-code`
//! set, lockfiles/cpu-claude-code.lock), `arenactl run` with agents/claude-code.toml as
//! shipped, a real containerd, and the agent's egress network to a scripted model endpoint in
//! a network namespace of the test's own (arena-endpoint). The CLI reads the kernel, writes a
//! faster one and runs the task's check with its own tools; the task is scored from what it
//! wrote, and the key it was given is found in no byte the run left. Needs root, containerd,
//! runc, the CNI plugins, nftables, and the npm registry once (the CLI's tarball is kept in
//! $ARENA_TARBALL_DIR).

mod common;

use std::path::PathBuf;
use std::process::Command;

use arena_endpoint::{Endpoint, Script};
use common::daemon::*;
use common::test_host::TestNet;
use common::{debs, repo};

const PREFIX_SUM: &str = "python2python/arena/prefix_sum";
const CANARY: &str = "sk-ant-arena-canary-9f1c2e7d";

/// A store holding lockfiles/cpu-claude-code.lock's images, from the pinned .debs and tarball.
fn claude_store() -> PathBuf {
    let tarballs = std::env::var_os("ARENA_TARBALL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/arena-tarballs"));
    for (script, recipe, dir) in [
        (
            "ci/fetch-debs.sh",
            "images/claude-code.toml",
            debs().to_path_buf(),
        ),
        (
            "ci/fetch-tarballs.sh",
            "images/claude-code.toml",
            tarballs.clone(),
        ),
    ] {
        let o = Command::new("bash")
            .arg(repo().join(script))
            .arg(repo().join(recipe))
            .arg(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{script}: {}", show(&o));
    }
    let store = repo().join("target/arena-claude-store");
    let o = arenactl()
        .args([
            "image",
            "verify",
            "--image-lock",
            "lockfiles/cpu-claude-code.lock",
            "--store",
        ])
        .arg(&store)
        .env("ARENA_DEB_DIR", debs())
        .env("ARENA_TARBALL_DIR", &tarballs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    store
}

#[test]
fn claude_code_in_its_image_optimizes_a_task_through_a_scripted_endpoint() {
    let store = claude_store();
    let d = Daemon::start();
    let net = TestNet::start(7);
    let kernel = "/workspace/source/prefix_sum.py";
    let faster = "from itertools import accumulate\n\n\ndef prefix_sum(xs):\n    return list(accumulate(xs))\n";
    let script = Script::parse(
        &format!(
            "[[turn]]\ntool = \"Read\"\ninput = {{ file_path = {kernel:?} }}\n\
             [[turn]]\ntool = \"Write\"\ninput = {{ file_path = {kernel:?}, content = {faster:?} }}\n\
             [[turn]]\ntool = \"Bash\"\ninput = {{ command = \"python3 scripts/task_runner.py correctness\", description = \"Check the kernel\" }}\n\
             [[turn]]\ntext = \"prefix_sum now uses itertools.accumulate; the check passes.\"\n"
        ),
        "scripted session",
    )
    .unwrap();
    let endpoint = Endpoint::start_in_netns(
        &PathBuf::from("/run/netns").join(&net.ns),
        format!("{}:8088", net.addr()).parse().unwrap(),
        script,
    )
    .unwrap();

    let out = d.dir.path().join("claude");
    let mut args = d.run_args_all("agents/claude-code.toml", &out);
    let at = args.iter().position(|a| a == "lockfiles/cpu.lock").unwrap();
    args[at] = "lockfiles/cpu-claude-code.lock".into();
    let at = args.iter().position(|a| a == "--store").unwrap();
    args[at + 1] = store.display().to_string();
    let o = arenactl()
        .args(&args)
        .args(["--tasks", PREFIX_SUM, "--json"])
        .env("ANTHROPIC_API_KEY", CANARY)
        .env("ANTHROPIC_BASE_URL", format!("http://{}:8088", net.addr()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));

    // The CLI's own session: every request carried the key, and the check it ran passed.
    let seen = endpoint.requests();
    let turns: Vec<_> = seen.iter().filter(|r| r.path == "/v1/messages").collect();
    assert!(
        turns.len() >= 4,
        "{} model requests: {}",
        turns.len(),
        show(&o)
    );
    assert!(seen.iter().all(|r| r.api_key.as_deref() == Some(CANARY)));
    let last = turns.last().unwrap().body.to_string();
    assert!(
        last.contains("correctness") && !last.contains("\"is_error\":true"),
        "{}",
        &last[last.len().saturating_sub(3000)..]
    );

    // Scored from what the CLI wrote: compiled, correct, faster than the original.
    let results = results(&out);
    assert_eq!(results.len(), 1);
    let s = score(&results[0]);
    assert!(s.compiled && s.correct, "{}", results[0]);
    assert!(s.speedup > 1.0, "speedup {}: {}", s.speedup, results[0]);
    assert_eq!(
        results[0]["provenance"]["agent_image"]
            .as_str()
            .map(|m| m.starts_with("sha256:")),
        Some(true),
        "{}",
        results[0]
    );

    // The key reached the agent's container only: nothing the run left holds it.
    let hits = files_containing(&out, CANARY.as_bytes());
    assert!(hits.is_empty(), "the key is in {hits:?}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stdout.contains(CANARY) && !stderr.contains(CANARY));
    assert!(empty(&d.leftovers()));
}
