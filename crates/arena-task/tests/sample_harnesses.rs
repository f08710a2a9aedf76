//! The CPU sample tasks' harnesses, run for real with python3: every gate passes on the
//! baseline, the reports have the AgentKernelArena shape, and a broken kernel fails the
//! correctness gate. (The Triton tasks need a GPU: ci/gpu/check-triton-tasks.sh runs them.)

use std::path::{Path, PathBuf};
use std::process::Command;

use arena_task::{discover, Task};

fn tasks_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks")
}

fn copy_task(id: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dst = tmp.path().join("task");
    let ok = Command::new("cp")
        .arg("-r")
        .arg(tasks_root().join(id))
        .arg(&dst)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    (tmp, dst)
}

/// Runs a gate's command list from the task directory; returns whether all succeeded.
fn run_gate(dir: &Path, commands: &[String]) -> bool {
    commands.iter().all(|c| {
        Command::new("sh")
            .arg("-c")
            .arg(c)
            .current_dir(dir)
            .status()
            .unwrap()
            .success()
    })
}

fn report(dir: &Path, name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("build").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn cpu_tasks_pass_every_gate_on_their_baselines() {
    let cpu: Vec<_> = discover(&tasks_root())
        .unwrap()
        .into_iter()
        .filter(|t| t.id.starts_with("python2python/"))
        .collect();
    assert_eq!(cpu.len(), 3);
    for found in cpu {
        let (_tmp, dir) = copy_task(&found.id);
        let task = Task::load(&dir, &found.id).unwrap();
        let c = &task.config;
        assert!(run_gate(&dir, &c.compile_command), "{}: compile", found.id);
        assert_eq!(report(&dir, "compile_report.json")["status"], "ok");
        assert!(
            run_gate(&dir, &c.correctness_command),
            "{}: correctness",
            found.id
        );
        let corr = report(&dir, "correctness_report.json");
        assert_eq!(corr["status"], "ok", "{corr}");
        assert_eq!(corr["num_shapes"], 3);
        assert!(
            run_gate(&dir, &c.performance_command),
            "{}: performance",
            found.id
        );
        let perf = report(&dir, "performance_report.json");
        let cases = perf.as_array().unwrap();
        assert_eq!(cases.len(), 3);
        for (i, case) in cases.iter().enumerate() {
            assert_eq!(case["test_case_id"], format!("perf{}", i + 1));
            assert!(case["execution_time_ms"].as_f64().unwrap() > 0.0, "{case}");
        }
    }
}

#[test]
fn a_wrong_kernel_fails_correctness_and_a_broken_one_fails_compile() {
    let (_tmp, dir) = copy_task("python2python/arena/prefix_sum");
    let task = Task::load(&dir, "prefix_sum").unwrap();
    // Off by one on the last element only.
    std::fs::write(
        dir.join("source/prefix_sum.py"),
        "import itertools\ndef prefix_sum(xs):\n    out = list(itertools.accumulate(xs))\n    out[-1] += 1\n    return out\n",
    )
    .unwrap();
    assert!(run_gate(&dir, &task.config.compile_command));
    assert!(!run_gate(&dir, &task.config.correctness_command));
    let corr = report(&dir, "correctness_report.json");
    assert_eq!(corr["status"], "fail");
    assert!(
        corr["error"].as_str().unwrap().contains("element 999"),
        "{corr}"
    );

    std::fs::write(dir.join("source/prefix_sum.py"), "def prefix_sum(xs:\n").unwrap();
    assert!(!run_gate(&dir, &task.config.compile_command));
    let comp = report(&dir, "compile_report.json");
    assert_eq!(comp["status"], "fail");
    assert!(
        comp["error"].as_str().unwrap().contains("SyntaxError"),
        "{comp}"
    );
}
