//! The real Claude Code and Codex CLIs as agents, end to end: their pinned images (the
//! `cpu-agents` set, lockfiles/cpu-agents.lock), `arenactl run` with agents/claude-code.toml and
//! agents/codex.toml as shipped, a real containerd, and the agent's egress network to a
//! scripted model endpoint in a network namespace of the test's own (arena-endpoint). Each CLI
//! reads the kernel, writes a faster one and runs the task's check with its own tools; the task
//! is scored from what it wrote, and the key it was given is found in no byte the run left.
//! Needs root, containerd, runc, the CNI plugins, nftables, and the npm registry once (the CLIs'
//! tarballs are kept in $ARENA_TARBALL_DIR).

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use arena_endpoint::{Endpoint, Script};
use common::daemon::*;
use common::test_host::TestNet;
use common::{cli_tarballs, debs, repo};

const PREFIX_SUM: &str = "python2python/arena/prefix_sum";
/// A store holding lockfiles/cpu-agents.lock's images, from the pinned .debs and tarballs.
fn agents_store() -> PathBuf {
    let tarballs = cli_tarballs(&["images/claude-code.toml"]);
    let o = Command::new("bash")
        .arg(repo().join("ci/fetch-debs.sh"))
        .arg(repo().join("images/claude-code.toml"))
        .arg(debs())
        .output()
        .unwrap();
    assert!(o.status.success(), "ci/fetch-debs.sh: {}", show(&o));
    let store = common::cached_store("cpu-agents", &["lockfiles/cpu-agents.lock"]);
    let o = arenactl()
        .args([
            "image",
            "verify",
            "--image-lock",
            "lockfiles/cpu-agents.lock",
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

const FASTER: &str =
    "from itertools import accumulate\n\n\ndef prefix_sum(xs):\n    return list(accumulate(xs))\n";

/// One CLI's run: `agent` on prefix_sum, its scripted `session` served on `port` of the test
/// host, with `key` in `key_var` and the endpoint's URL in `url_var`; checked end to end.
struct Cli<'a> {
    agent: &'a str,
    key_var: &'a str,
    key: &'a str,
    url_var: &'a str,
    url_path: &'a str,
    api: &'a str,
    port: u16,
    session: String,
}

fn run_cli(d: &Daemon, store: &std::path::Path, net: &TestNet, c: Cli) {
    let script = Script::parse(&c.session, "scripted session").unwrap();
    let endpoint = Endpoint::start_in_netns(
        &PathBuf::from("/run/netns").join(&net.ns),
        format!("{}:{}", net.addr(), c.port).parse().unwrap(),
        script,
    )
    .unwrap();
    let name = c
        .agent
        .trim_start_matches("agents/")
        .trim_end_matches(".toml");
    let out = d.dir.path().join(name);
    let mut args = d.run_args_all(c.agent, &out);
    let at = args.iter().position(|a| a == "lockfiles/cpu.lock").unwrap();
    args[at] = "lockfiles/cpu-agents.lock".into();
    let at = args.iter().position(|a| a == "--store").unwrap();
    args[at + 1] = store.display().to_string();
    // The key is the run's: given from a file by the submitter, never the runner's
    // environment. A runner whose own environment holds another value passes it on nowhere.
    let key_file = d.dir.path().join(format!("{name}.key"));
    std::fs::write(&key_file, format!("{}\n", c.key)).unwrap();
    let o = arenactl()
        .args(&args)
        .args(["--tasks", PREFIX_SUM, "--json", "--secret"])
        .arg(format!("{}={}", c.key_var, key_file.display()))
        .env(c.key_var, "sk-the-runners-own-environment")
        .env(
            c.url_var,
            format!("http://{}:{}{}", net.addr(), c.port, c.url_path),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{name}: {}", show(&o));

    // The CLI's own session: every request carried the key, and the check it ran passed.
    let seen = endpoint.requests();
    let turns: Vec<_> = seen.iter().filter(|r| r.path == c.api).collect();
    assert!(
        turns.len() >= 4,
        "{name}: {} model requests: {}",
        turns.len(),
        show(&o)
    );
    assert!(
        seen.iter().all(|r| r.api_key.as_deref() == Some(c.key)),
        "{name}"
    );
    let last = turns.last().unwrap().body.to_string();
    assert!(
        last.contains("checked-42"),
        "{name}: {}",
        &last[last.len().saturating_sub(3000)..]
    );

    // Scored from what the CLI wrote: compiled, correct, faster than the original.
    let results = results(&out);
    assert_eq!(results.len(), 1, "{name}");
    let s = score(&results[0]);
    assert!(s.compiled && s.correct, "{name}: {}", results[0]);
    assert!(
        common::tier::reads_faster(s.speedup, 1.0),
        "{name}: speedup {}: {}",
        s.speedup,
        results[0]
    );
    assert_eq!(
        results[0]["provenance"]["agent_image"]
            .as_str()
            .map(|m| m.starts_with("sha256:")),
        Some(true),
        "{name}: {}",
        results[0]
    );

    // The key reached the agent's container only: nothing the run left holds it.
    let hits = files_containing(&out, c.key.as_bytes());
    assert!(hits.is_empty(), "{name}: the key is in {hits:?}");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(!stdout.contains(c.key) && !stderr.contains(c.key), "{name}");
}

#[test]
fn real_agent_clis_in_their_images_optimize_a_task_through_a_scripted_endpoint() {
    let store = agents_store();
    let d = Daemon::start();
    let net = TestNet::start(7);
    let kernel = "/workspace/source/prefix_sum.py";
    // What it prints only when the check passes; its text is not in the command itself.
    let check = "python3 scripts/task_runner.py correctness && echo checked-$((40 + 2))";
    run_cli(
        &d,
        &store,
        &net,
        Cli {
            agent: "agents/claude-code.toml",
            key_var: "ANTHROPIC_API_KEY",
            key: "sk-ant-arena-canary-9f1c2e7d",
            url_var: "ANTHROPIC_BASE_URL",
            url_path: "",
            api: "/v1/messages",
            port: 8088,
            session: format!(
                "[[turn]]\ntool = \"Read\"\ninput = {{ file_path = {kernel:?} }}\n\
                 [[turn]]\ntool = \"Write\"\ninput = {{ file_path = {kernel:?}, content = {FASTER:?} }}\n\
                 [[turn]]\ntool = \"Bash\"\ninput = {{ command = {check:?}, description = \"Check the kernel\" }}\n\
                 [[turn]]\ntext = \"prefix_sum now uses itertools.accumulate; the check passes.\"\n"
            ),
        },
    );
    let write = format!("cat > {kernel} <<'EOF'\n{FASTER}EOF");
    run_cli(
        &d,
        &store,
        &net,
        Cli {
            agent: "agents/codex.toml",
            key_var: "OPENAI_API_KEY",
            key: "sk-proj-arena-canary-4b8e0a13",
            url_var: "OPENAI_BASE_URL",
            url_path: "/v1",
            api: "/v1/responses",
            port: 8089,
            session: format!(
                "[[turn]]\ntool = \"exec_command\"\ninput = {{ cmd = \"cat {kernel}\" }}\n\
                 [[turn]]\ntool = \"exec_command\"\ninput = {{ cmd = {write:?} }}\n\
                 [[turn]]\ntool = \"exec_command\"\ninput = {{ cmd = {check:?} }}\n\
                 [[turn]]\ntext = \"prefix_sum now uses itertools.accumulate; the check passes.\"\n"
            ),
        },
    );
    assert!(empty(&d.leftovers()));
}

/// An agent that spills its key everywhere it can (its output, a file of its workspace, the
/// kernel it hands in): the key is taken out of all of it before anything is staged or kept,
/// and said so; no byte the run left holds it.
#[test]
fn a_key_the_agent_spills_is_redacted_from_everything_the_run_keeps() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let key = "sk-arena-spilled-canary-51d0";
    let agent = tmp.join("spill.toml");
    std::fs::write(
        &agent,
        r#"name = "spill"
image = "task"
secrets = ["SPILL_KEY"]
command = ["sh", "-c", "echo \"my key is $SPILL_KEY\"; echo \"$SPILL_KEY\" >&2; mkdir -p /workspace/cfg; echo \"{\\\"key\\\": \\\"$SPILL_KEY\\\"}\" > /workspace/cfg/settings.json; printf '\\n# %s\\n' \"$SPILL_KEY\" >> /workspace/source/prefix_sum.py"]
network = "none"
timeout_s = 60
"#,
    )
    .unwrap();
    let key_file = tmp.join("spill.key");
    std::fs::write(&key_file, key).unwrap();
    let out = tmp.join("spill");
    let o = arenactl()
        .args(d.run_args_all(agent.to_str().unwrap(), &out))
        .args(["--tasks", PREFIX_SUM, "--secret"])
        .arg(format!("SPILL_KEY={}", key_file.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let hits = files_containing(&out, key.as_bytes());
    assert!(hits.is_empty(), "the key is in {hits:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !stderr.contains(key) && stderr.contains("redacted"),
        "{stderr}"
    );
    // What the agent wrote is kept, the key replaced by its name; the kernel still runs.
    let item = out.join("tasks/python2python__arena__prefix_sum/r0");
    let kept = std::fs::read_to_string(item.join("workspace.kept/cfg/settings.json")).unwrap();
    assert_eq!(kept.trim(), "{\"key\": \"[redacted SPILL_KEY]\"}");
    // prefix_sum alone, whose kernel file holds the spilled key as a comment.
    let rs = results(&out);
    assert_eq!(rs.len(), 1, "{rs:?}");
    assert_eq!(rs[0]["task_id"], PREFIX_SUM, "{}", rs[0]);
    assert!(score(&rs[0]).correct, "{}", rs[0]);
    assert!(!files_containing(&item.join("logs"), b"[redacted SPILL_KEY]").is_empty());
}
