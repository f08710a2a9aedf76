//! `arenactl task …` and `arenactl score` run as a user runs them: exit codes, one clear error
//! line per problem naming file and field, JSON output, no panics.

use crate::common;

use std::process::Output;

use common::cli::*;
use common::repo;

/// Validates a broken task and returns its one error line.
fn single_error(config: &str) -> String {
    let (tmp, _) = task_tree(config);
    let o = arenactl(&["task", "validate", "tasks"], tmp.path());
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let errors: Vec<_> = stderr(&o)
        .lines()
        .filter(|l| l.starts_with("error: "))
        .map(str::to_string)
        .collect();
    assert_eq!(errors.len(), 1, "expected one error line: {}", stderr(&o));
    assert!(stdout(&o).contains("0 valid, 1 invalid"), "{}", stdout(&o));
    errors[0].clone()
}

#[test]
fn sample_tasks_are_valid() {
    let o = arenactl(&["task", "validate", "tasks"], &repo());
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("10 valid, 0 invalid"), "{}", stdout(&o));
    for id in [
        "c2rv32/kernelcraft/conv1d_i16",
        "c2rv32/kernelcraft/ffn_i8",
        "c2rv32/kernelcraft/fma_chain_i32",
        "c2rv32/kernelcraft/gemm_i8",
        "c2rv32/kernelcraft/sum_sq_i16",
        "python2python/arena/matmul",
        "python2python/arena/prefix_sum",
        "python2python/arena/sum_squares",
        "triton2triton/arena/add_rmsnorm",
        "triton2triton/arena/row_softmax",
    ] {
        assert!(stdout(&o).contains(&format!("ok       {id}")), "{id}");
    }
}

#[test]
fn validate_json_is_machine_readable() {
    let o = arenactl(&["task", "validate", "tasks", "--json"], &repo());
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["valid"], 10);
    assert_eq!(v["invalid"], 0);
    assert_eq!(v["tasks"].as_array().unwrap().len(), 10);
    assert_eq!(v["tasks"][0]["task_type"], "c2rv32");
}

#[test]
fn missing_field() {
    let e = single_error(&GOOD_CONFIG.replace("task_type: python2python\n", ""));
    assert_eq!(
        e,
        "error: tasks/t/config.yaml: task_type: required field is missing"
    );
}

#[test]
fn wrong_type() {
    let e = single_error(&GOOD_CONFIG.replace(
        "compile_command: [python3 scripts/task_runner.py compile]",
        "compile_command: 42",
    ));
    assert_eq!(
        e,
        "error: tasks/t/config.yaml: compile_command: expected a list of strings, found a number"
    );
}

#[test]
fn yaml_syntax_error() {
    let e = single_error(&format!("{GOOD_CONFIG}prompt: {{instructions: [\n"));
    assert!(
        e.starts_with("error: tasks/t/config.yaml: YAML syntax error:"),
        "{e}"
    );
    assert!(e.contains("at line 8"), "{e}");
}

#[test]
fn parent_dir_in_source_path() {
    let e = single_error(&GOOD_CONFIG.replace("[source/k.py]", "[../outside.py]"));
    assert_eq!(
        e,
        "error: tasks/t/config.yaml: source_file_path[0]: `../outside.py` contains `..`; paths must stay inside the task directory"
    );
}

#[test]
fn absolute_source_path() {
    let e = single_error(&GOOD_CONFIG.replace("[source/k.py]", "[/etc/passwd]"));
    assert!(
        e.contains("source_file_path[0]: `/etc/passwd` is absolute"),
        "{e}"
    );
}

#[test]
fn missing_source_file() {
    let e = single_error(&GOOD_CONFIG.replace("[source/k.py]", "[source/nope.py]"));
    assert!(
        e.contains("source_file_path[0]: `source/nope.py` does not exist in the task directory"),
        "{e}"
    );
}

#[test]
fn symlink_escaping_the_task_dir() {
    let (tmp, dir) = task_tree(&GOOD_CONFIG.replace("[source/k.py]", "[source/evil.py]"));
    std::fs::write(tmp.path().join("secret.py"), "x = 1\n").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("secret.py"), dir.join("source/evil.py")).unwrap();
    let o = arenactl(&["task", "validate", "tasks"], tmp.path());
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("tasks/t/config.yaml: source_file_path[0]: `source/evil.py` resolves to")
            && err.contains("outside the task directory"),
        "{err}"
    );
}

#[test]
fn external_sources_are_deferred() {
    // A repository task's sources appear only after the clone.
    let (tmp, _) = task_tree(&format!(
        "{}repo_url: https://example.invalid/r.git\n",
        GOOD_CONFIG.replace("[source/k.py]", "[kernels/not_cloned_yet.py]")
    ));
    let o = arenactl(&["task", "validate", "tasks"], tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("checked at workspace setup"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unknown_fields_and_types_are_warnings() {
    let (tmp, _) = task_tree(&format!(
        "{}future_field: 1\n",
        GOOD_CONFIG.replace("python2python", "cuda2cuda")
    ));
    let o = arenactl(&["task", "validate", "tasks", "--json"], tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let warnings = v["tasks"][0]["warnings"].as_array().unwrap();
    let text: Vec<_> = warnings.iter().map(|w| w.as_str().unwrap()).collect();
    assert!(
        text.iter()
            .any(|w| w.contains("unknown task type `cuda2cuda`")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|w| w.contains("future_field: unknown field")),
        "{text:?}"
    );
}

#[test]
fn empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    let o = arenactl(&["task", "validate", "empty"], tmp.path());
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim(),
        "error: empty: no config.yaml here or in any directory below (not a task directory)"
    );
}

#[test]
fn usage_errors_exit_2() {
    let o = arenactl(&["task", "validate"], &repo());
    assert_eq!(o.status.code(), Some(2));
    let o = arenactl(&["task", "frobnicate"], &repo());
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn score_example_results() {
    let o = arenactl(&["score", "ci/examples/results.json"], &repo());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("| triton2triton | 2 | 3 | 0.0 | 83.3 | 83.3 | 2.500 ± 1.025 | 350.0 |"),
        "{out}"
    );
    assert!(
        out.contains("| python2python | 5 | 3 | 2 | 0 | 0 | 0.600 |"),
        "{out}"
    );

    let o = arenactl(&["score", "ci/examples/results.json", "--json"], &repo());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["aggregates"].as_array().unwrap().last().unwrap()["task_type"],
        "all"
    );
    assert_eq!(v["tasks"].as_array().unwrap().len(), 12);
}

#[test]
fn score_refuses_bad_files() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("bad.json"),
        "{\"tasks\": [{\"task_id\": 3}]}",
    )
    .unwrap();
    let o = arenactl(&["score", "bad.json"], tmp.path());
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("error: bad.json: tasks[0]: invalid type"),
        "{}",
        stderr(&o)
    );

    // The same task and run twice would be counted twice: refused.
    let example = repo().join("ci/examples/results.json");
    let e = example.to_str().unwrap();
    let o = arenactl(&["score", e, e], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("appears more than once"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unseen_sets_are_sealed_and_reproducible() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = repo().join("tasks");
    let t = tasks.to_str().unwrap();
    let gen = |out: &str, seed: &str| {
        arenactl(
            &[
                "unseen", "generate", "--tasks", t, "--seed", seed, "--out", out,
            ],
            tmp.path(),
        )
    };
    let a = gen("a", "5");
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    let b = gen("b", "5");
    let c = gen("c", "6");
    let digest = |o: &Output| stdout(o).split_whitespace().next().unwrap().to_string();
    assert_eq!(digest(&a), digest(&b));
    assert_ne!(digest(&a), digest(&c));
    let d = arenactl(&["unseen", "digest", "a"], tmp.path());
    assert_eq!(d.status.code(), Some(0));
    assert_eq!(digest(&d), digest(&a));
    // Regenerating into the same directory is refused; tampering is named.
    let again = gen("a", "7");
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("not empty"), "{}", stderr(&again));
    let f = tmp.path().join("a/python2python__arena__prefix_sum.json");
    let text = std::fs::read_to_string(&f).unwrap();
    let tampered = text.replacen("\"entry\": \"(", "\"entry\": \"(9", 1);
    assert_ne!(tampered, text);
    std::fs::write(&f, tampered).unwrap();
    let d = arenactl(&["unseen", "digest", "a"], tmp.path());
    assert_eq!(d.status.code(), Some(1));
    assert!(
        stderr(&d).contains("files[python2python__arena__prefix_sum.json].sha256"),
        "{}",
        stderr(&d)
    );
}

#[test]
fn one_bad_task_never_stops_a_set_and_the_exit_code_says_partial() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tasks");
    // A good task (a copy of the prefix_sum sample), one whose config is invalid, one that
    // declares no shapes.
    let good = root.join("python2python/x/good");
    std::fs::create_dir_all(good.join("source")).unwrap();
    std::fs::create_dir_all(good.join("scripts")).unwrap();
    let sample = repo().join("tasks/python2python/arena/prefix_sum");
    for f in [
        "config.yaml",
        "source/prefix_sum.py",
        "scripts/task_runner.py",
    ] {
        std::fs::copy(sample.join(f), good.join(f)).unwrap();
    }
    let bad = root.join("python2python/x/bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("config.yaml"), "task_type: python2python\n").unwrap();
    let plain = root.join("python2python/x/plain");
    std::fs::create_dir_all(plain.join("source")).unwrap();
    std::fs::copy(sample.join("config.yaml"), plain.join("config.yaml")).unwrap();
    std::fs::copy(
        sample.join("source/prefix_sum.py"),
        plain.join("source/prefix_sum.py"),
    )
    .unwrap();
    std::fs::create_dir_all(plain.join("scripts")).unwrap();
    std::fs::write(
        plain.join("scripts/task_runner.py"),
        "print('no shapes here')\n",
    )
    .unwrap();

    let o = arenactl(
        &[
            "unseen", "generate", "--tasks", "tasks", "--seed", "3", "--out", "set", "--json",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let m: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cov = &m["coverage"];
    assert_eq!(
        (
            cov["tasks"].as_u64(),
            cov["with_set"].as_u64(),
            cov["no_declaration"].as_u64(),
            cov["failed"].as_u64()
        ),
        (Some(3), Some(1), Some(1), Some(1)),
        "{m}"
    );
    assert_eq!(cov["all_categories"], 1, "{m}");
    let skipped = m["skipped"].as_array().unwrap();
    let kind = |id: &str| {
        skipped.iter().find(|s| s["task_id"] == id).unwrap()["kind"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(kind("python2python/x/bad"), "invalid_task");
    assert_eq!(kind("python2python/x/plain"), "no_declaration");
    assert!(
        stderr(&o).contains("python2python/x/bad: skipped:"),
        "{}",
        stderr(&o)
    );
    // The set is sealed as any other.
    let d = arenactl(&["unseen", "digest", "set"], tmp.path());
    assert_eq!(d.status.code(), Some(0), "{}", stderr(&d));

    // Without the bad task it is whole: exit 0 (a task declaring no shapes is no failure).
    std::fs::remove_dir_all(&bad).unwrap();
    let o = arenactl(
        &[
            "unseen", "generate", "--tasks", "tasks", "--seed", "3", "--out", "set2",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The same id under two --tasks roots is refused, naming both.
    let other = tmp.path().join("other/python2python/x/good");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(good.join("config.yaml"), other.join("config.yaml")).unwrap();
    let o = arenactl(
        &[
            "unseen", "generate", "--tasks", "tasks", "other", "--seed", "3", "--out", "set3",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("names two tasks")
            && e.contains("tasks/python2python/x/good")
            && e.contains("other/python2python/x/good"),
        "{e}"
    );
}
