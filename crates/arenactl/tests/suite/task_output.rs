//! What `arenactl task list|show|digest` prints, in full, as text and as JSON, and how its
//! output ends when the reader goes away.

use crate::common;

use std::process::Command;

use common::cli::*;
use common::repo;

#[test]
fn list_show_and_digest() {
    let root = repo();
    let o = arenactl(&["task", "list", "tasks", "--json"], &root);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 10);

    let o = arenactl(
        &["task", "show", "python2python/arena/matmul", "--json"],
        &root,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["config"]["source_file_path"][0], "source/matmul.py");
    let shown_digest = v["digest"].as_str().unwrap().to_string();

    let o = arenactl(&["task", "show", "no/such/task"], &root);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("task `no/such/task` not found under tasks"),
        "{}",
        stderr(&o)
    );

    // The digest of a copy made with another umask, in another order, is the same.
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("matmul");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 077 && cp -r {} {} && touch -d 2001-01-01 {}/source/matmul.py",
            root.join("tasks/python2python/arena/matmul").display(),
            copy.display(),
            copy.display()
        ))
        .status()
        .unwrap();
    assert!(status.success());
    let o = arenactl(&["task", "digest", copy.to_str().unwrap()], &root);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o).trim(), format!("{shown_digest}  matmul"));
}

#[test]
fn show_prints_every_field_in_full() {
    let (tmp, _) = task_tree(&format!(
        "{}target_file_path: [source/k.hip]\nharness_path: scripts/h.py\nrepo_url: https://example.invalid/r.git\nfuture_field: 1\nprompt:\n  instructions: |\n    Optimize k.\n\n    Keep the signature.\n    Third line.\n",
        GOOD_CONFIG
    ));
    let o = arenactl(&["task", "show", "tasks/t"], tmp.path());
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "source files:        source/k.py",
        "target files:        source/k.hip",
        "agent's files:       source/k.hip",
        "harness:             scripts/h.py",
        "repo url:            https://example.invalid/r.git",
        "unknown fields:      future_field",
        "instructions:\n    Optimize k.\n",
        "    Keep the signature.\n    Third line.\n",
    ] {
        assert!(out.contains(want), "`{want}` missing from:\n{out}");
    }
    // The same fields as JSON.
    let o = arenactl(&["task", "show", "tasks/t", "--json"], tmp.path());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["config"]["target_file_path"][0], "source/k.hip");
    assert!(v["config"]["prompt"]["instructions"]
        .as_str()
        .unwrap()
        .ends_with("Third line.\n"));
}

#[test]
fn a_reader_that_goes_away_ends_output_quietly() {
    // `arenactl … --json | head -1`: the pipe's reader is gone before the first write.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_arenactl"))
        .args(["task", "validate", "--json", "ci/fixtures/aka-slice/tasks"])
        .current_dir(repo())
        .stdout(writer)
        .output()
        .expect("run arenactl");
    no_panic(&o);
    assert_eq!(o.status.code(), Some(141), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

#[test]
fn ids_are_canonical_whatever_directory_is_named_and_empty_directories_are_reported() {
    let root = repo();
    let id_of = |args: &[&str], cwd: &std::path::Path| -> Vec<String> {
        let o = arenactl(args, cwd);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        match v.as_array() {
            Some(a) => a
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_string())
                .collect(),
            None => vec![v["id"].as_str().unwrap().to_string()],
        }
    };
    let matmul = "python2python/arena/matmul";
    assert!(id_of(&["task", "list", "tasks", "--json"], &root)
        .iter()
        .any(|i| i == matmul));
    assert!(
        id_of(&["task", "list", "tasks/python2python", "--json"], &root)
            .iter()
            .any(|i| i == matmul)
    );
    assert!(id_of(
        &["task", "list", "arena", "--json"],
        &root.join("tasks/python2python")
    )
    .iter()
    .any(|i| i == matmul));
    assert_eq!(
        id_of(
            &["task", "show", "tasks/python2python/arena/matmul", "--json"],
            &root
        ),
        [matmul]
    );
    assert_eq!(
        id_of(
            &["task", "show", "matmul", "--json"],
            &root.join("tasks/python2python/arena")
        ),
        [matmul]
    );
    // --root keeps ids relative to it.
    assert_eq!(
        id_of(
            &[
                "task",
                "show",
                "arena/matmul",
                "--root",
                "tasks/python2python",
                "--json"
            ],
            &root
        ),
        [matmul]
    );
    let o = arenactl(
        &["task", "digest", "tasks/python2python/arena/matmul"],
        &root,
    );
    assert!(
        stdout(&o).trim_end().ends_with(&format!("  {matmul}")),
        "{}",
        stdout(&o)
    );

    // A directory with no config.yaml in it or below is named, not skipped silently.
    let (tmp, _) = task_tree(GOOD_CONFIG);
    std::fs::create_dir_all(tmp.path().join("tasks/drafts/k")).unwrap();
    std::fs::write(tmp.path().join("tasks/drafts/k/config.yml"), "").unwrap();
    let o = arenactl(&["task", "list", "tasks"], tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: tasks/drafts: no config.yaml here or below: skipped"),
        "{}",
        stderr(&o)
    );
    let o = arenactl(&["task", "validate", "tasks", "--json"], tmp.path());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["skipped"], serde_json::json!(["tasks/drafts"]));
}
