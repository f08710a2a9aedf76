//! A trusted harness whose ENTRY is a class (KernelBench's `ModelNew` is one): each kernel
//! process builds one instance per configuration, with the weights' seed the harness sends,
//! and calls it; the evaluator's reference builds its own the same way. A CPU task of that
//! form (pure Python: weights drawn from `random` at construction) through real containerd:
//! the untouched class passes (so both sides drew the same weights), and a class that hands
//! back a cached output per input length fails correctness, named. Needs root, containerd and
//! runc.

use crate::common;

use std::path::Path;

use common::daemon::*;
use serde_json::Value;

const ID: &str = "python2python/class/weighted_sum";

const KERNEL: &str = r#"import random


class Weighted:
    """sum(x[i] * w[i % n]) with n weights drawn when it is built (as a torch module draws
    its parameters)."""

    def __init__(self, n):
        self.w = [random.randint(-9, 9) for _ in range(n)]

    def __call__(self, xs):
        w, n = self.w, len(self.w)
        return sum(x * w[i % n] for i, x in enumerate(xs))
"#;

const HARNESS: &str = r#""""Trusted harness of weighted_sum (a class entry). The command line runs the gates in one
process for the agent's own checks."""
import importlib.util
import json
import os
import random
import sys
import time

SOURCE = "source/weighted.py"
ENTRY = "Weighted"
DEVICE = "cpu"
TEST_SHAPES = [(2000, 4), (5000, 7)]  # (length, weights)
WEIGHT_SEED = 7


def make_inputs(shape, seed):
    length, n = shape
    rng = random.Random(seed)
    init = json.dumps({"args": [n], "seed": WEIGHT_SEED, "config": list(shape)})
    return (init, [rng.randint(-1000, 1000) for _ in range(length)])


def reference(init, xs):
    spec = json.loads(init)
    random.seed(spec["seed"])
    (n,) = spec["args"]
    w = [random.randint(-9, 9) for _ in range(n)]
    return sum(x * w[i % n] for i, x in enumerate(xs))


def _gates(gate):
    spec = importlib.util.spec_from_file_location("kernel_under_test", SOURCE)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    made = {}
    cases = []
    for i, shape in enumerate(TEST_SHAPES):
        init, xs = make_inputs(shape, 1000 + i)
        if init not in made:
            random.seed(json.loads(init)["seed"])
            made[init] = getattr(m, ENTRY)(*json.loads(init)["args"])
        t = time.perf_counter()
        got = made[init](xs)
        ms = (time.perf_counter() - t) * 1e3
        if gate != "compile" and got != reference(init, xs):
            raise AssertionError(f"shape {shape}: {got} != {reference(init, xs)}")
        cases.append({"test_case_id": f"perf{i + 1}", "execution_time_ms": ms})
    return cases


def main(gate):
    os.makedirs("build", exist_ok=True)
    try:
        cases = _gates(gate)
        report = cases if gate == "performance" else {"status": "ok", "error": None}
        code = 0
    except Exception as e:
        report, code = {"status": "fail", "error": f"{type(e).__name__}: {e}"}, 1
    with open(os.path.join("build", f"{gate}_report.json"), "w") as f:
        json.dump(report, f)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
"#;

/// The attack: one output per input length, computed once (KernelBench's "cached outputs").
const CACHED_AGENT: &str = r#"name = "class-cached"
image = "task"
command = ["sh", "-c", """
set -e
cat >> /workspace/source/weighted.py <<'PY'


_honest = Weighted.__call__
_cache = {}


def _cached(self, xs):
    if len(xs) not in _cache:
        _cache[len(xs)] = _honest(self, xs)
    return _cache[len(xs)]


Weighted.__call__ = _cached
PY
"""]
network = "none"
timeout_s = 120
max_iterations = 1
"#;

fn write_task(root: &Path) {
    let dir = root.join(ID);
    std::fs::create_dir_all(dir.join("source")).unwrap();
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("source/weighted.py"), KERNEL).unwrap();
    std::fs::write(dir.join("scripts/task_runner.py"), HARNESS).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        "task_type: python2python\nsource_file_path: [source/weighted.py]\n\
         target_kernel_functions: [Weighted]\ntrusted_harness: scripts/task_runner.py\n\
         compile_command: [python3 scripts/task_runner.py compile]\n\
         correctness_command: [python3 scripts/task_runner.py correctness]\n\
         performance_command: [python3 scripts/task_runner.py performance]\n",
    )
    .unwrap();
}

#[test]
fn a_class_entry_is_built_per_configuration_with_the_harness_seed() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    write_task(&tmp.join("tasks"));
    let lock = lock_tasks(tmp, "class", &["python2python"]);
    std::fs::write(tmp.join("cached.toml"), CACHED_AGENT).unwrap();
    let run = |agent: &Path, out: &Path| -> Value {
        let o = arenactl()
            .args(["run", "--image-lock"])
            .arg(&lock)
            .arg("--agent")
            .arg(agent)
            .args(["--gpus", "cpu:1", "--containerd", &d.socket, "--json"])
            .args(CHEAP_TIMING)
            .arg("--store")
            .arg(store())
            .arg("--out")
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let rs = results(out);
        assert_eq!(rs.len(), 1, "{rs:?}");
        rs[0].clone()
    };

    // Untouched: trusted, and correct on both configurations (the instance and the reference
    // drew the same weights; a kernel built with other weights would fail).
    let r = run(
        &common::repo().join("ci/agents/noop.toml"),
        &tmp.join("noop"),
    );
    assert_eq!(r["trust"], "trusted", "{r}");
    // The evaluator's own scratch (its HOME: a derived harness compiles there) is a file
    // system it can write, on the container's read-only root.
    assert_eq!(
        r["evaluators"]["candidate"]["own_scratch"], "writable",
        "{r}"
    );
    let s = score(&r);
    assert!(s.correct, "{r}");
    assert!(common::tier::result_reads_untouched(s.speedup, &r), "{r}");

    // A cached output per input length: wrong on the next call's fresh inputs.
    let r = run(&tmp.join("cached.toml"), &tmp.join("cached"));
    let s = score(&r);
    assert!(!s.correct, "{r}");
    let why = r["candidate"]["correctness"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("shape (2000, 4)"), "{r}");
}
