//! KernelBench problems as tasks (ci/fixtures/kernelbench-slice: 24 problem files of levels
//! 1-3, copied unchanged from KernelBench): `arenactl task import kernelbench` turns every one
//! into a valid task with a trusted harness, twice to the same digests, and unseen generation
//! reads their sizes and keeps their rules. Bad input is refused with a reason. (Running the
//! tasks needs PyTorch and a GPU: docs/benchmarks.md has the H100 runs.)

use crate::common;

use std::path::Path;
use std::process::Output;

use arena_task::hidden::{set_violations, TaskUnseen};
use common::cli::{stderr, stdout};
use common::repo;
use serde_json::Value;

fn arenactl(args: &[&str]) -> Output {
    common::cli::arenactl(args, &repo())
}

fn text(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

fn import(from: &Path, out: &Path) -> Output {
    arenactl(&[
        "task",
        "import",
        "kernelbench",
        from.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ])
}

fn slice() -> std::path::PathBuf {
    repo().join("ci/fixtures/kernelbench-slice")
}

#[test]
fn every_problem_of_the_slice_becomes_a_valid_task_with_the_same_digest_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let o = import(&slice(), &a);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let first: Value = serde_json::from_slice(&o.stdout).unwrap();
    let tasks = first["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 24, "{first}");
    for level in ["level1/", "level2/", "level3/"] {
        assert!(tasks
            .iter()
            .any(|t| t["id"].as_str().unwrap().starts_with(level)));
    }
    assert!(first["skipped"].as_array().unwrap().is_empty(), "{first}");
    for t in tasks {
        assert!(t["digest"].as_str().unwrap().starts_with("sha256:"), "{t}");
    }
    let swish = tasks.iter().find(|t| t["id"] == "level1/25_Swish").unwrap();
    assert_eq!(
        swish["configuration"],
        serde_json::json!({"batch_size": 4096, "dim": 393216})
    );
    // `N = 2048 * 2` is a size too.
    let square = tasks
        .iter()
        .find(|t| t["id"] == "level1/1_Square_matrix_multiplication_")
        .unwrap();
    assert_eq!(square["configuration"], serde_json::json!({"N": 4096}));

    // The same problems give the same tasks, byte for byte.
    let o = import(&slice(), &b);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let second: Value = serde_json::from_slice(&o.stdout).unwrap();
    let digests = |v: &Value| -> Vec<(String, String)> {
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["id"].to_string(), t["digest"].to_string()))
            .collect()
    };
    assert_eq!(digests(&first), digests(&second));

    let v: Value = serde_json::from_slice(
        &arenactl(&["task", "validate", a.to_str().unwrap(), "--json"]).stdout,
    )
    .unwrap();
    assert_eq!(v["valid"], 24, "{v}");

    // The task: the problem as KernelBench has it, the agent's start (Model renamed), the
    // trusted harness, and the type.
    let dir = a.join("level1/25_Swish");
    let original = std::fs::read(slice().join("KernelBench/level1/25_Swish.py")).unwrap();
    assert_eq!(
        std::fs::read(dir.join("reference/25_Swish.py")).unwrap(),
        original
    );
    let start = std::fs::read_to_string(dir.join("source/model_new.py")).unwrap();
    assert!(start.contains("class ModelNew(nn.Module):"), "{start}");
    assert!(!start.contains("class Model("), "{start}");
    let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    assert!(config.contains("task_type: kernelbench"), "{config}");
    assert!(
        config.contains("trusted_harness: scripts/task_runner.py"),
        "{config}"
    );
    let harness = std::fs::read_to_string(dir.join("scripts/task_runner.py")).unwrap();
    assert!(harness.contains("ENTRY = \"ModelNew\""));
    assert!(harness.contains("{\"batch_size\": 4096, \"dim\": 393216}"));
}

#[test]
fn unseen_sets_vary_the_sizes_and_keep_their_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = tmp.path().join("tasks");
    let hidden = tmp.path().join("hidden");
    assert_eq!(import(&slice(), &tasks).status.code(), Some(0));
    let o = arenactl(&[
        "unseen",
        "generate",
        "--tasks",
        tasks.to_str().unwrap(),
        "--seed",
        "1",
        "--per-task",
        "6",
        "--out",
        hidden.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 24, "{v}");
    let found = arena_task::discover::discover(&tasks).unwrap();
    let mut broken = Vec::new();
    for f in files {
        let id = f["task_id"].as_str().unwrap();
        let set: TaskUnseen = serde_json::from_slice(
            &std::fs::read(hidden.join(f["file"].as_str().unwrap())).unwrap(),
        )
        .unwrap();
        assert_eq!(set.declaration, "TEST_SHAPES", "{id}");
        let task = found.iter().find(|t| t.id == id).unwrap();
        let task = arena_task::Task::load(&task.dir, id).unwrap();
        broken.extend(set_violations(&task, &set).unwrap());
        // Every configuration names the same constants as the visible one, with new values.
        let visible = found
            .iter()
            .find(|t| t.id == id)
            .unwrap()
            .dir
            .join("scripts/task_runner.py");
        let harness = std::fs::read_to_string(visible).unwrap();
        for c in &set.configs {
            let entry: Value = serde_json::from_str(&c.entry).unwrap();
            let keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
            for k in keys {
                assert!(harness.contains(&format!("\"{k}\":")), "{id}: {k}");
            }
        }
    }
    assert!(broken.is_empty(), "{broken:?}");
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();

    // Nothing to import.
    std::fs::create_dir_all(t.join("empty/src")).unwrap();
    let o = import(&t.join("empty"), &t.join("out1"));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("no KernelBench problems"), "{}", text(&o));

    // A file that is not a problem: the others are imported, it is named with why (exit 3).
    let kb = t.join("kb");
    std::fs::create_dir_all(kb.join("level1")).unwrap();
    std::fs::copy(
        slice().join("KernelBench/level1/25_Swish.py"),
        kb.join("level1/25_Swish.py"),
    )
    .unwrap();
    std::fs::write(
        kb.join("level1/helpers.py"),
        "def get_inputs():\n    return []\n",
    )
    .unwrap();
    let o = import(&kb, &t.join("out2"));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tasks"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["skipped"][0]["file"], "level1/helpers.py", "{v}");
    assert!(
        v["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("class Model"),
        "{v}"
    );

    // Into a directory that holds something: refused, nothing written.
    let o = import(&kb, &t.join("out2"));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not empty"), "{}", text(&o));

    // Two problems that would be one task: both named.
    std::fs::create_dir_all(kb.join("again/level1")).unwrap();
    std::fs::copy(
        kb.join("level1/25_Swish.py"),
        kb.join("again/level1/25_Swish.py"),
    )
    .unwrap();
    let o = import(&kb, &t.join("out3"));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let msg = text(&o);
    assert!(
        msg.contains("again/level1/25_Swish.py")
            && msg.contains("both become task `level1/25_Swish`"),
        "{msg}"
    );
    assert!(!t.join("out3").join("level1").exists());
}

/// The harness's `problem(config)`: the problem's module with the configuration's values
/// pinned wherever its top level assigns them, values derived from them following. Run with
/// python3 on a problem that needs no torch.
#[test]
fn the_harness_runs_the_problem_with_a_configuration_pinned() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = tmp.path().join("kb/level1");
    std::fs::create_dir_all(&kb).unwrap();
    std::fs::write(
        kb.join("7_Toy.py"),
        "class Model:\n    def __init__(self, k):\n        self.k = k\n\n\
         N = 2048 * 2\nheight = width = 8\nshape = (N, height)\n\n\
         def get_inputs():\n    return [shape, width]\n\n\
         def get_init_inputs():\n    return [N // 2]\n",
    )
    .unwrap();
    let out = tmp.path().join("tasks");
    let o = import(&tmp.path().join("kb"), &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["tasks"][0]["configuration"],
        serde_json::json!({"N": 4096, "height": 8, "width": 8})
    );
    let harness = out.join("level1/7_Toy/scripts/task_runner.py");
    let script = "import importlib.util, sys\n\
        spec = importlib.util.spec_from_file_location('h', sys.argv[1])\n\
        h = importlib.util.module_from_spec(spec)\n\
        spec.loader.exec_module(h)\n\
        visible = h.TEST_SHAPES[0]\n\
        print(h.problem(visible).get_inputs(), h.problem(visible).get_init_inputs())\n\
        m = h.problem({'N': 6, 'width': 3})\n\
        print(m.get_inputs(), m.get_init_inputs(), m.Model(1).k)\n\
        print(h.init_key({'N': 6, 'width': 3}))\n\
        try:\n    h.problem({'nope': 1})\nexcept KeyError as e:\n    print('refused', e)\n";
    let o = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&harness)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    assert_eq!(lines[0], "[(4096, 8), 8] [2048]", "{lines:?}");
    assert_eq!(lines[1], "[(6, 8), 3] [3] 1", "{lines:?}");
    let key: Value = serde_json::from_str(&lines[2]).unwrap();
    assert_eq!(
        key,
        serde_json::json!({"args": [3], "seed": 42, "config": {"N": 6, "width": 3}})
    );
    assert!(
        lines[3].starts_with("refused") && lines[3].contains("nope"),
        "{lines:?}"
    );
}
