//! `arenactl unseen generate --probe`: two CPU tasks whose original kernels refuse inputs
//! past a size (like a kernel with one fixed-size buffer), which the generator's scale-up
//! configurations pass. Unprobed, the set holds configurations the original fails; probed
//! in the tasks' images, every sealed configuration is one the original passed, and a run on
//! that set finds the original passing all of them. One task is judged by arena's trusted
//! evaluator, the other by its own harness (per configuration after the whole set fails).
//! Needs root, containerd and runc.

mod common;

use std::path::Path;

use common::daemon::*;
use common::repo;
use serde_json::Value;

/// (task id, the sample task it copies, its source file, the most elements it takes).
const TASKS: [(&str, &str, &str, i64); 2] = [
    (
        "python2python/probe/limited_prefix_sum",
        "python2python/arena/prefix_sum",
        "source/prefix_sum.py",
        150_000,
    ),
    (
        "python2python/probe/limited_sum_squares",
        "python2python/arena/sum_squares",
        "source/sum_squares.py",
        1_200_000,
    ),
];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// The tasks, each kernel refusing inputs past its limit.
fn write_tasks(root: &Path) {
    for (id, sample, source, limit) in TASKS {
        let dir = root.join(id);
        copy_dir(&repo().join("tasks").join(sample), &dir);
        let p = dir.join(source);
        let text = std::fs::read_to_string(&p).unwrap();
        let name = p.file_stem().unwrap().to_str().unwrap().to_string();
        let guarded = text.replacen(
            &format!("def {name}(xs):\n"),
            &format!(
                "def {name}(xs):\n    if len(xs) > {limit}:\n        \
                 raise ValueError('one fixed buffer: at most {limit} elements')\n"
            ),
            1,
        );
        assert_ne!(guarded, text, "{}: no `def {name}(xs):`", p.display());
        std::fs::write(&p, guarded).unwrap();
    }
}

/// The element count of a set entry `(N,)`.
fn elements(entry: &str) -> i64 {
    entry
        .trim_matches(|c| c == '(' || c == ')' || c == ',' || c == ' ')
        .parse()
        .unwrap_or_else(|_| panic!("entry {entry}"))
}

fn set_file(set: &Path, id: &str) -> Value {
    let f = set.join(format!("{}.json", id.replace('/', "__")));
    serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap()
}

#[test]
fn a_probed_set_holds_only_configurations_the_original_passes() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let tasks = tmp.join("tasks");
    write_tasks(&tasks);
    let lock = lock_tasks(tmp, "probe", &["python2python"]);
    let generate = |out: &Path, probe: bool| {
        let mut c = arenactl();
        c.args([
            "unseen",
            "generate",
            "--seed",
            "5",
            "--per-task",
            "6",
            "--json",
        ])
        .arg("--tasks")
        .arg(&tasks)
        .arg("--out")
        .arg(out);
        if probe {
            c.arg("--probe")
                .arg(&lock)
                .args(["--gpus", "cpu:1", "--containerd", &d.socket])
                .arg("--store")
                .arg(store());
        }
        c.output().unwrap()
    };

    // Unprobed, the generator makes configurations these originals cannot run.
    let plain = tmp.join("plain");
    let o = generate(&plain, false);
    assert!(o.status.success(), "{}", show(&o));
    for (id, _, _, limit) in TASKS {
        let f = set_file(&plain, id);
        let over = f["configs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| elements(c["entry"].as_str().unwrap()) > limit)
            .count();
        assert!(over > 0, "{id}: no configuration past {limit}: {f}");
    }

    // Probed: only configurations the original passed, each marked so, and the probe named.
    let probed = tmp.join("probed");
    let o = generate(&probed, true);
    assert!(o.status.success(), "{}", show(&o));
    let m: Value = serde_json::from_slice(&o.stdout).unwrap();
    let lock_digest = arena_image::Digest::of_file(&lock).unwrap().0.to_string();
    assert_eq!(m["probe"]["image_lock_digest"], lock_digest.as_str(), "{m}");
    let probe_tasks = m["probe"]["tasks"].as_array().unwrap();
    assert_eq!(probe_tasks.len(), 2, "{m}");
    for (id, _, _, limit) in TASKS {
        let t = probe_tasks.iter().find(|t| t["task_id"] == id).unwrap();
        assert!(
            t["passed"].as_u64() < t["probed"].as_u64(),
            "{id}: the probe dropped nothing: {t}"
        );
        assert!(t["image"].as_str().unwrap().starts_with("sha256:"), "{t}");
        let f = set_file(&probed, id);
        let configs = f["configs"].as_array().unwrap();
        assert!(!configs.is_empty(), "{f}");
        for c in configs {
            assert_eq!(c["original_passed"], true, "{c}");
            assert!(elements(c["entry"].as_str().unwrap()) <= limit, "{c}");
        }
    }
    // The probe's private candidate sets and runs are gone.
    assert!(!tmp.join(".probed.probe").exists());

    // A run on the probed set: the original passes every configuration, one by one.
    let out = tmp.join("run");
    let o = arenactl()
        .args(["run", "--image-lock"])
        .arg(&lock)
        .args(["--agent", "ci/agents/noop.toml", "--gpus", "cpu:1"])
        .args(["--containerd", &d.socket, "--json", "--unseen"])
        .arg(&probed)
        .arg("--store")
        .arg(store())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    for r in results(&out) {
        let id = r["task_id"].as_str().unwrap();
        let n = set_file(&probed, id)["configs"].as_array().unwrap().len();
        let passed = r["unseen"]["original_passed"].as_array().unwrap();
        assert_eq!(passed.len(), n, "{id}: {r}");
        assert!(passed.iter().all(|p| p == true), "{id}: {r}");
    }

    // A tree that is not the locked one is refused before anything runs, naming the task.
    let (id, _, source, _) = TASKS[0];
    std::fs::write(
        tasks.join(id).join(source),
        "def prefix_sum(xs):\n    return []\n",
    )
    .unwrap();
    let o = generate(&tmp.join("drifted"), true);
    assert!(!o.status.success(), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(id) && err.contains("pins"), "{err}");
    assert!(!tmp.join("drifted").exists());
}
