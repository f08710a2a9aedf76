//! Tasks whose file holds the kernel and its tests, split by a line of `#`s (AgentKernelArena's
//! rocmbench format; arena_task::split): the agent's work is the kernel part, the tests stay
//! the task's. Two CPU tasks made from sum_squares in that format: one names the file in
//! `source_file_path` (rocmbench's triton2triton tasks), one names none (instruction2triton:
//! the agent completes the kernel of the file its commands test). Needs root, containerd and
//! runc.
//!
//! Before the split, the first task's agent rewrote the tests that judged it (a wrong kernel
//! passed with any time it liked), and the second task's agent was never evaluated at all
//! (nothing of its workspace was taken).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::daemon::*;
use common::repo;
use serde_json::Value;

const DECLARED: &str = "python2python/split/sum_squares";
const INFERRED: &str = "instruction2triton/split/sum_squares";
const FILE: &str = "sum_squares_test.py";

/// sum_squares' kernel, the rule, then its harness reading the kernel from its own module.
fn split_file() -> String {
    let sample = repo().join("tasks/python2python/arena/sum_squares");
    let kernel = std::fs::read_to_string(sample.join("source/sum_squares.py")).unwrap();
    let harness = std::fs::read_to_string(sample.join("scripts/task_runner.py")).unwrap();
    let load =
        "    spec = importlib.util.spec_from_file_location(\"kernel_under_test\", SOURCE)\n    \
                module = importlib.util.module_from_spec(spec)\n    \
                spec.loader.exec_module(module)\n    \
                fn = getattr(module, ENTRY, None)\n";
    assert!(harness.contains(load), "the sample harness changed");
    let harness = harness
        .replace(load, "    fn = globals().get(ENTRY)\n")
        .replace(
            "SOURCE = \"source/sum_squares.py\"",
            &format!("SOURCE = \"{FILE}\""),
        );
    format!("{kernel}\n{}\n{harness}", "#".repeat(146))
}

fn write_tasks(root: &Path) {
    for (id, task_type, sources) in [
        (DECLARED, "python2python", format!("[{FILE}]")),
        (INFERRED, "instruction2triton", "[]".to_string()),
    ] {
        let dir = root.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE), split_file()).unwrap();
        // Read-only where it lies, as in a shared checkout: the agent's workspace copy is
        // still the agent's to edit (the agents below rewrite this file).
        std::fs::set_permissions(dir.join(FILE), std::fs::Permissions::from_mode(0o444)).unwrap();
        std::fs::write(
            dir.join("config.yaml"),
            format!(
                "task_type: {task_type}\nsource_file_path: {sources}\n\
                 target_kernel_functions: [sum_squares]\n\
                 compile_command: [python3 {FILE} compile]\n\
                 correctness_command: [python3 {FILE} correctness]\n\
                 performance_command: [python3 {FILE} performance]\n"
            ),
        )
        .unwrap();
    }
}

fn result<'a>(rs: &'a [Value], id: &str) -> &'a Value {
    rs.iter()
        .find(|r| r["task_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}: {rs:?}"))
}

#[test]
fn the_agent_gives_the_kernel_and_the_task_keeps_its_tests() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let tasks = tmp.join("tasks");
    write_tasks(&tasks);
    let lock = lock_tasks(tmp, "split", &["python2python", "instruction2triton"]);
    // The declaration is in the tests part: both tasks get a set.
    let hidden = tmp.join("hidden");
    let o = arenactl()
        .args([
            "unseen",
            "generate",
            "--seed",
            "3",
            "--per-task",
            "4",
            "--json",
        ])
        .arg("--tasks")
        .arg(&tasks)
        .arg("--out")
        .arg(&hidden)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let m: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(m["files"].as_array().unwrap().len(), 2, "{m}");

    let run = |agent: &str, out: &Path| {
        let o = arenactl()
            .args(["run", "--image-lock"])
            .arg(&lock)
            .args(["--agent", agent, "--gpus", "cpu:1"])
            .args(CHEAP_TIMING)
            .args(["--containerd", &d.socket, "--json", "--unseen"])
            .arg(&hidden)
            .arg("--store")
            .arg(store())
            .arg("--out")
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        results(out)
    };

    // The agent's kernel part is what runs: correct, and slowed by a sleep no timing noise can
    // hide (the task's kernel reads about 1.0 against itself; this one about 0.25), on the
    // visible and the unseen configurations (under the task's tests, rewritten for the unseen
    // ones).
    let rs = run("ci/agents/split_kernel.toml", &tmp.join("kernel"));
    for id in [DECLARED, INFERRED] {
        let r = result(&rs, id);
        let s = score(r);
        assert!(s.correct, "{id}: {r}");
        assert!(s.speedup < 0.6, "{id}: the agent's kernel was not run: {r}");
        let u = &r["unseen"];
        // Four unseen configurations, not the three visible ones: the tests ran rewritten.
        assert_eq!(
            u["optimized"]["performance"].as_array().unwrap().len(),
            4,
            "{id}: {r}"
        );
        for kernel in ["original_passed", "optimized_passed"] {
            let passed = u[kernel].as_array().unwrap();
            assert!(
                !passed.is_empty() && passed.iter().all(|p| p == true),
                "{id}: {kernel}: {r}"
            );
        }
    }

    // A wrong kernel under tests of its own: the task's tests judge it.
    let rs = run(
        "ci/agents/adversary/split_tests.toml",
        &tmp.join("adversary"),
    );
    for id in [DECLARED, INFERRED] {
        let r = result(&rs, id);
        let s = score(r);
        assert!(s.compiled && !s.correct, "{id}: {r}");
        assert_eq!(s.score, 20.0, "{id}: {r}");
        let error = r["candidate"]["correctness"]["error"]
            .as_str()
            .unwrap_or("");
        assert!(error.contains("expected"), "{id}: {r}");
        let u = &r["unseen"];
        assert!(
            u["optimized_passed"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p == false),
            "{id}: {r}"
        );
    }
    assert!(empty(&d.leftovers()));
}
