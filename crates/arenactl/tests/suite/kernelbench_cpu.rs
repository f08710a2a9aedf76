//! KernelBench problems evaluated on the CPU, for real: five level-1 problems
//! (ci/fixtures/kernelbench-cpu: KernelBench's files with smaller sizes) imported as tasks,
//! locked on images/cuda-pytorch.toml (torch 2.10.0 from pinned PyPI wheels, fetched once into
//! $ARENA_WHEEL_DIR, else ~/.cache/arena/wheels), and evaluated by arena's trusted evaluator in
//! containers through the Evaluate API: the untouched ModelNew passes every gate, one that is
//! wrong fails correctness naming the error, one that returns cached outputs fails; and one
//! `arenactl run` of a task scores as the API does. A ModelNew that returns zeros fails
//! correctness, except on 23_Softmax, whose outputs are all under the tolerance: there it, and
//! the untouched ModelNew, pass every gate and are credited no speedup (the zeros probe). The
//! original compiled by torch.compile is timed beside them as KernelBench's second baseline:
//! the image has no C++ compiler for inductor, so where inductor generates code the result
//! says why it could not be; one task's harness asks for the `aot_eager` backend (no
//! compiler), which gets the column. Needs root, containerd and runc.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arena_client::{Evaluate, Evaluation, Runner};
use common::daemon::*;
use common::repo;

const PROBLEMS: [&str; 4] = [
    "kernelbench/level1/1_Square_matrix_multiplication_",
    "kernelbench/level1/25_Swish",
    "kernelbench/level1/49_Max_reduction_over_a_dimension",
    "kernelbench/level1/89_cumsum",
];

/// The pinned wheels of images/cuda-pytorch.toml (4.2 GB, fetched once).
fn wheels() -> PathBuf {
    let dir = std::env::var_os("ARENA_WHEEL_DIR")
        .map(PathBuf::from)
        // The user's wheel cache (arenactl's default too): it outlives a clean clone.
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/arena/wheels")))
        .unwrap_or_else(|| repo().join("target/arena-wheels"));
    let recipe = repo().join("images/cuda-pytorch.toml");
    for (script, d) in [
        ("ci/fetch-wheels.sh", dir.clone()),
        ("ci/fetch-debs.sh", common::debs().to_path_buf()),
    ] {
        let o = Command::new("bash")
            .arg(repo().join(script))
            .arg(&recipe)
            .arg(&d)
            .output()
            .unwrap();
        assert!(o.status.success(), "{script}: {}", show(&o));
    }
    dir
}

/// A problem whose outputs are all under KernelBench's tolerance (each about 1/4096 against an
/// `atol` of 1e-2): its check passes zeros. The CPU analogue of the six vLLM tasks and of
/// KernelBench's own 23_Softmax that a zeros kernel was credited on before 2026-11-28.
const SOFTMAX: &str = "kernelbench/level1/23_Softmax";

/// The task whose harness compiles its original with `aot_eager` (inductor needs a C++
/// compiler, which the image lacks).
const AOT_EAGER: &str = PROBLEMS[2];

/// The problems imported under `dir/tasks/kernelbench` and locked on cuda-pytorch.
fn lock(dir: &Path, wheels: &Path, store: &Path) -> PathBuf {
    let o = arenactl()
        .args([
            "task",
            "import",
            "kernelbench",
            "ci/fixtures/kernelbench-cpu",
            "--out",
        ])
        .arg(dir.join("tasks/kernelbench"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let harness = dir
        .join("tasks")
        .join(AOT_EAGER)
        .join("scripts/task_runner.py");
    let text = std::fs::read_to_string(&harness).unwrap();
    let line = "\nCOMPILED_BASELINE = {}\n";
    assert!(text.contains(line), "{}", harness.display());
    std::fs::write(
        &harness,
        text.replace(line, "\nCOMPILED_BASELINE = {\"backend\": \"aot_eager\"}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("sets.toml"),
        format!(
            "[[set]]\nname = \"kb-cpu\"\nrecipe = \"{}\"\ntasks = \"tasks\"\ntask_types = [\"kernelbench\"]\n",
            repo().join("images/cuda-pytorch.toml").display()
        ),
    )
    .unwrap();
    let lock = dir.join("kb-cpu.lock");
    let o = arenactl()
        .args(["lock", "--set", "kb-cpu", "--sets"])
        .arg(dir.join("sets.toml"))
        .arg("--out")
        .arg(&lock)
        .arg("--store")
        .arg(store)
        .env("ARENA_WHEEL_DIR", wheels)
        .env("ARENA_DEB_DIR", common::debs())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    lock
}

/// 23_Softmax, untouched or returning zeros: every gate's check passes, and no speedup is
/// credited (its check passes zeros, found by the evaluator's probe at the correctness gate),
/// so the two read alike. Elsewhere zeros fail correctness as any wrong output does.
fn admits_zeros(agent: &str, e: &Evaluation) {
    let (r, task) = (&e.result, SOFTMAX);
    assert!(e.score.correct, "{task} {agent}: {}", e.result_json);
    assert_eq!(e.score.speedup, 0.0, "{task} {agent}: {}", e.result_json);
    assert!(
        e.score.performance_failure.is_some(),
        "{task} {agent}: {}",
        e.result_json
    );
    for c in &r.candidate.performance {
        let why = c.error.as_deref().unwrap_or_default();
        assert!(
            why.contains("tolerance_admits_zeros"),
            "{task} {agent}: {why}"
        );
    }
    let record = serde_json::to_value(&r.evaluators["candidate"]).unwrap();
    assert!(
        record["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|x| x
                .as_str()
                .unwrap_or_default()
                .starts_with("tolerance_admits_zeros"))),
        "{task} {agent}: {record}"
    );
}

/// The task's ModelNew after a KernelBench test agent's script (ci/agents/kernelbench) has run
/// on a copy of it.
fn attacked(dir: &Path, agent: &str, task: &str) -> Vec<u8> {
    let a = arena_run::Agent::load(&repo().join(format!("ci/agents/kernelbench/{agent}.toml")))
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("source")).unwrap();
    std::fs::copy(
        dir.join("tasks").join(task).join("source/model_new.py"),
        ws.path().join("source/model_new.py"),
    )
    .unwrap();
    let script = a.command[2].replace("/workspace", ws.path().to_str().unwrap());
    let o = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(o.status.success(), "{agent}: {}", show(&o));
    std::fs::read(ws.path().join("source/model_new.py")).unwrap()
}

#[test]
fn kernelbench_problems_evaluate_on_the_cpu() {
    let wheels = wheels();
    // The base (torch from 4.2 GB of wheels) is built once per recipe and kept between runs;
    // the problems' layers are locked into it afresh.
    let store = common::cached_store("kb-cpu", &["images/cuda-pytorch.toml"]);
    let d = Daemon::start();
    let lockfile = lock(d.dir.path(), &wheels, &store);
    let sock = d.dir.path().join("runner.sock");
    let mut server = arenactl()
        // Two slots: the evaluations below go two at a time.
        .args(["runner", "serve", "--gpus", "cpu:2", "--listen"])
        .arg(format!("unix:{}", sock.display()))
        .args(["--containerd", &d.socket, "--store"])
        .arg(&store)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(50));
    }
    let tasks = d.dir.path().join("tasks");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let outcomes: Vec<(String, &str, Evaluation)> = rt.block_on(async {
        let r = Runner::connect(&format!("unix:{}", sock.display()))
            .await
            .unwrap();
        let units: Vec<(&str, &str)> = PROBLEMS
            .iter()
            .flat_map(|t| ["untouched", "wrong", "cached"].map(|a| (*t, a)))
            .chain([
                (SOFTMAX, "untouched"),
                (SOFTMAX, "zeros"),
                (PROBLEMS[1], "zeros"),
            ])
            .collect();
        // Two callers, each with every other unit, one request at a time each: the runner's
        // two slots stay busy.
        let one = |k: usize| {
            let (r, units, tasks, lockfile, dir) = (&r, &units, &tasks, &lockfile, d.dir.path());
            async move {
                let mut out = Vec::new();
                for &(task, agent) in units.iter().skip(k).step_by(2) {
                    let file = if agent == "untouched" {
                        std::fs::read(tasks.join(task).join("source/model_new.py")).unwrap()
                    } else {
                        attacked(dir, agent, task)
                    };
                    let e = r
                        .evaluate(
                            Evaluate::new(lockfile, task)
                                .file("source/model_new.py", file)
                                .trusted_pairs(3),
                        )
                        .await
                        .unwrap_or_else(|e| panic!("{task} {agent}: {e}"));
                    out.push((task.to_string(), agent, e));
                }
                out
            }
        };
        let (mut a, b) = tokio::join!(one(0), one(1));
        a.extend(b);
        a
    });
    let _ = Command::new("kill")
        .args(["-INT", &server.id().to_string()])
        .status();
    let _ = server.wait();
    for (task, agent, e) in &outcomes {
        let r = &e.result;
        assert_eq!(r.trust, arena_run::result::Trust::Trusted, "{task}");
        // The record as results.json holds it.
        let record = serde_json::to_value(&r.evaluators["candidate"]).unwrap();
        assert_eq!(record["device"], "cpu", "{task}");
        assert!(e.score.vs_compiled, "{task}: {}", e.result_json);
        let compiled = &record["compiled_baseline"];
        if task == SOFTMAX {
            admits_zeros(agent, e);
            continue;
        }
        match *agent {
            "untouched" if task == AOT_EAGER => {
                assert!(e.score.correct, "{task}: {}", e.result_json);
                assert_eq!(compiled["options"]["backend"], "aot_eager", "{task}");
                assert!(compiled.get("error").is_none(), "{task}: {compiled}");
                for c in &r.candidate.performance {
                    let pairs = c.pairing.compiled_pairs_ms.as_ref().unwrap();
                    assert_eq!(pairs.len(), c.pairing.pairs_ms.as_ref().unwrap().len());
                    assert!(c.pairing.compiled_ms.unwrap() > 0.0, "{task}");
                }
                let s = e.score.compiled_speedup.unwrap();
                assert!(s > 0.0 && s.is_finite(), "{task}: {s}");
            }
            "untouched" => {
                assert!(e.score.correct, "{task}: {}", e.result_json);
                assert!(e.score.speedup > 0.0, "{task}: {}", e.result_json);
                // The request's pairs, not the default's 10, timed the candidate.
                for c in &r.candidate.performance {
                    assert_eq!(c.pairing.pairs_ms.as_ref().map(Vec::len), Some(3), "{task}");
                }
                // Inductor generates C++ for a CPU, and the image has no compiler: Swish
                // (pointwise) cannot be compiled, and the column is missing with its reason,
                // the task's score as without it. A problem inductor hands to ATen whole (a
                // matrix product) needs none, and has the column.
                match compiled.get("error").and_then(|v| v.as_str()) {
                    Some(why) => {
                        assert!(why.to_lowercase().contains("compiler"), "{task}: {why}");
                        assert_eq!(e.score.compiled_speedup, None, "{task}");
                    }
                    None => assert!(e.score.compiled_speedup.is_some(), "{task}: {compiled}"),
                }
                if task.ends_with("25_Swish") {
                    assert!(compiled.get("error").is_some(), "{task}: {compiled}");
                }
            }
            _ => {
                assert!(
                    e.score.compiled && !e.score.correct,
                    "{task} {agent}: {}",
                    e.result_json
                );
                let why = r.candidate.correctness.error.as_deref().unwrap_or_default();
                // KernelBench's tolerance, named with the error the wrong output made (a
                // cached output answers another call's inputs).
                assert!(
                    why.contains("exceeds atol=0.01, rtol=0.01"),
                    "{task} {agent}: {why}"
                );
            }
        }
    }
    // The same untouched candidate through a run: baseline, agent and evaluator containers.
    let out = d.dir.path().join("run");
    let o = arenactl()
        .args(["run", "--image-lock"])
        .arg(&lockfile)
        .args([
            "--agent",
            "ci/agents/noop.toml",
            "--gpus",
            "cpu:1",
            "--containerd",
            &d.socket,
        ])
        .arg("--store")
        .arg(&store)
        .arg("--out")
        .arg(&out)
        .args(["--tasks", PROBLEMS[1], "--json"])
        .args(CHEAP_TIMING)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let rs = results(&out);
    let s = score(&rs[0]);
    assert!(s.correct, "{}", rs[0]);
    assert_eq!(rs[0]["trust"], "trusted");
    assert!(empty(&d.leftovers()), "{}", d.leftovers());
}
