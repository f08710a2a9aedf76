//! `arenactl unseen generate --probe`: two CPU tasks whose original kernels refuse inputs
//! past a size (like a kernel with one fixed-size buffer), which the generator's scale-up
//! configurations pass. Unprobed, the set holds configurations the original fails; probed
//! in the tasks' images, every sealed configuration is one the original passed, and a run on
//! that set finds the original passing all of them. One task is judged by arena's trusted
//! evaluator, the other by its own harness (per configuration after the whole set fails).
//! Needs root, containerd and runc.

use crate::common;

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

/// A third task: sum_squares whose harness makes each case's input in `gen_inputs(seed)`
/// from a size set at the top of its body (`N = 300000`), the form of AgentKernelArena's fla
/// tasks: each unseen configuration is a rewritten harness of its own, and every
/// configuration of a kernel is evaluated in one evaluator container.
const LOCALS: (&str, i64) = ("python2python/probe/limited_sum_squares_locals", 400_000);

fn write_locals_task(root: &Path) {
    let dir = root.join(LOCALS.0);
    copy_dir(&root.join(TASKS[1].0), &dir);
    let p = dir.join("scripts/task_runner.py");
    let mut text = std::fs::read_to_string(&p).unwrap();
    for (from, to) in [
        (
            "TEST_SHAPES = [\n    (100000,),\n    (300000,),\n    (1000000,),\n]",
            "SEEDS = [1000, 1001]\n\n\ndef gen_inputs(seed):\n    N = 300000\n    \
             return array.array(\"h\", random.Random(seed).randbytes(2 * N)).tolist()",
        ),
        (
            "for i, shape in enumerate(TEST_SHAPES):",
            "for i, seed in enumerate(SEEDS):",
        ),
        ("make_input(shape, seed=1000 + i)", "gen_inputs(seed)"),
        (
            "make_input(shape, seed=2000 + i)",
            "gen_inputs(seed + 1000)",
        ),
        ("len(TEST_SHAPES)", "len(SEEDS)"),
        ("shape {shape}", "seed {seed}"),
        ("{\"shape\": list(shape)}", "{\"seed\": seed}"),
    ] {
        assert!(text.contains(from), "{}: no {from:?}", p.display());
        text = text.replace(from, to);
    }
    std::fs::write(&p, text).unwrap();
    let k = dir.join(TASKS[1].2);
    let kernel = std::fs::read_to_string(&k).unwrap();
    // The kernel also checks that it cannot read the other configurations' harnesses (the
    // views the gate runner lays over its tree): if it could, it fails every configuration.
    let guarded = kernel.replace(&TASKS[1].3.to_string(), &LOCALS.1.to_string())
        + "\nimport os as _os\nif _os.path.exists('/arena/views') and _os.access('/arena/views', _os.R_OK):\n    \
           raise PermissionError('the unseen views are readable')\n";
    assert_ne!(guarded, kernel);
    std::fs::write(&k, guarded).unwrap();
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
    write_locals_task(&tasks);
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
    assert_eq!(probe_tasks.len(), 3, "{m}");
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
    let f = set_file(&probed, LOCALS.0);
    assert_eq!(f["declaration"], "gen_inputs():locals", "{f}");
    let configs = f["configs"].as_array().unwrap();
    assert!(!configs.is_empty(), "{f}");
    for c in configs {
        assert_eq!(c["original_passed"], true, "{c}");
        assert!(elements(c["entry"].as_str().unwrap()) <= LOCALS.1, "{c}");
    }
    let t = probe_tasks
        .iter()
        .find(|t| t["task_id"] == LOCALS.0)
        .unwrap();
    assert!(t["passed"].as_u64() < t["probed"].as_u64(), "{t}");
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
        .args(CHEAP_TIMING)
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
        let cases = r["unseen"]["original"]["performance"].as_array().unwrap();
        if id == LOCALS.0 {
            // Every configuration's cases, named by configuration (two seeds each).
            assert_eq!(cases.len(), 2 * n, "{r}");
            assert!(cases[0]["test_case_id"]
                .as_str()
                .unwrap()
                .starts_with("u0."));
        }
    }
    // One evaluator container per kernel for the per-file configurations, not one each.
    let phases: Vec<String> = walk_names(&out);
    assert!(phases.iter().any(|p| p == "unseen-original"), "{phases:?}");
    assert!(
        !phases.iter().any(|p| p.starts_with("unseen-original-")),
        "{phases:?}"
    );

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
    assert!(
        err.contains(id) && err.contains("differs from the lockfile"),
        "{err}"
    );
    assert!(!tmp.join("drifted").exists());
}

/// The names of every directory below `dir`.
fn walk_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.push(e.file_name().to_string_lossy().into_owned());
                stack.push(e.path());
            }
        }
    }
    out
}
