//! A derived trusted harness (arena_task::derive) that the evaluator refuses when it loads it
//! (a construct of the task's runner it cannot follow, found only by running the runner): the
//! task run goes on with the task's own commands, self-reported, and its result says why.
//! A CPU task through real containerd: its harness raises the evaluator's NotDerivable (by the
//! class's name, as derived.py's does) naming the runner and the construct. Needs root,
//! containerd and runc.

use crate::common;

use std::path::Path;

use common::daemon::*;

const ID: &str = "python2python/derived/total";

const KERNEL: &str = "def total(xs):\n    return sum(xs)\n";

/// The derived harness as the evaluator meets it, refusing as derived.py does.
const HARNESS: &str = r#"# arena: trusted harness derived from the task's runner (scripts/task_runner.py)
class NotDerivable(ValueError):
    pass


raise NotDerivable("scripts/task_runner.py: run_correctness calls total more than once per configuration")
"#;

/// The task's own runner: its gates in one process (self-reported).
const RUNNER: &str = r#"import importlib.util, json, os, sys, time

spec = importlib.util.spec_from_file_location("k", "source/total.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
os.makedirs("build", exist_ok=True)
gate = sys.argv[1]
xs = list(range(20000))
t = time.perf_counter()
ok = mod.total(xs) == sum(xs)
ms = (time.perf_counter() - t) * 1e3
if gate == "performance":
    report = [{"test_case_id": "perf1", "execution_time_ms": ms}]
else:
    report = {"status": "ok" if ok else "fail", "error": None if ok else "wrong total"}
with open(os.path.join("build", f"{gate}_report.json"), "w") as f:
    json.dump(report, f)
sys.exit(0 if ok else 1)
"#;

fn write_task(root: &Path) {
    let dir = root.join(ID);
    std::fs::create_dir_all(dir.join("source")).unwrap();
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("source/total.py"), KERNEL).unwrap();
    std::fs::write(dir.join("scripts/task_runner.py"), RUNNER).unwrap();
    std::fs::write(dir.join("arena_harness.py"), HARNESS).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        "task_type: python2python\nsource_file_path: [source/total.py]\n\
         target_kernel_functions: [total]\ntrusted_harness: arena_harness.py\n\
         compile_command: [python3 scripts/task_runner.py compile]\n\
         correctness_command: [python3 scripts/task_runner.py correctness]\n\
         performance_command: [python3 scripts/task_runner.py performance]\n",
    )
    .unwrap();
}

#[test]
fn a_refused_derived_harness_leaves_the_task_self_reported_with_the_reason() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    write_task(&tmp.join("tasks"));
    let lock = lock_tasks(tmp, "derived", &["python2python"]);
    let out = tmp.join("noop");
    let o = arenactl()
        .args(["run", "--image-lock"])
        .arg(&lock)
        .arg("--agent")
        .arg(common::repo().join("ci/agents/noop.toml"))
        .args(["--gpus", "cpu:1", "--containerd", &d.socket, "--json"])
        .args(CHEAP_TIMING)
        .arg("--store")
        .arg(store())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let rs = results(&out);
    assert_eq!(rs.len(), 1, "{rs:?}");
    let r = &rs[0];
    assert_ne!(r["trust"], "trusted", "{r}");
    let why = r["trust_reason"].as_str().unwrap_or_default();
    assert!(
        why.contains("refused the derived harness")
            && why.contains("more than once per configuration"),
        "{r}"
    );
    // The task's own commands judged it: the untouched kernel passes them.
    assert!(score(r).correct, "{r}");
    assert!(r["provenance"]["evaluator"].is_null(), "{r}");
}
