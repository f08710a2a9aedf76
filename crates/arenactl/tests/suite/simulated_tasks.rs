//! The simulated (c2rv32) tasks end to end: the rv32sim image rebuilt from its
//! pinned inputs (the Verilator build included) to the digests lockfiles/rv32.lock pins, then
//! `arenactl run` on its five tasks through a real containerd with scripted agents: one that
//! writes faster kernels, one that writes wrong ones, and the adversaries of
//! ci/agents/adversary/simulated.toml. Needs root, containerd, runc and `unshare`.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::daemon::*;
use common::{debs, repo};
use serde_json::Value;

const TASKS: [&str; 5] = [
    "conv1d_i16",
    "ffn_i8",
    "fma_chain_i32",
    "gemm_i8",
    "sum_sq_i16",
];

/// The pinned packages of the simulator's image and of the root it is built in.
fn fetch_debs() {
    for recipe in ["images/rv32sim.toml", "images/rv32sim-builder.toml"] {
        let st = Command::new("bash")
            .arg(repo().join("ci/fetch-debs.sh"))
            .arg(repo().join(recipe))
            .arg(debs())
            .status()
            .unwrap();
        assert!(st.success(), "ci/fetch-debs.sh {recipe}");
    }
}

fn run(d: &Daemon, store: &Path, agent: &str, out: &Path, more: &[&str]) -> Vec<Value> {
    let o = arenactl()
        .args([
            "run",
            "--image-lock",
            "lockfiles/rv32.lock",
            "--agent",
            agent,
        ])
        .args(["--gpus", "cpu:1", "--containerd", &d.socket, "--store"])
        .arg(store)
        .arg("--out")
        .arg(out)
        .args(more)
        .env("ARENA_DEB_DIR", debs())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let mut rs = results(out);
    rs.sort_by(|a, b| a["task_id"].as_str().cmp(&b["task_id"].as_str()));
    let ids: Vec<&str> = rs
        .iter()
        .map(|r| r["task_id"].as_str().unwrap().rsplit('/').next().unwrap())
        .collect();
    assert_eq!(ids, TASKS, "one result per task");
    rs
}

/// A case's field as an integer number of cycles.
fn cycles(case: &Value, key: &str) -> u64 {
    case[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {case}"))
}

fn baseline_cycles(r: &Value) -> Vec<u64> {
    r["baseline"]["performance"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| cycles(c, "cycles"))
        .collect()
}

#[test]
fn simulated_tasks_build_reproducibly_score_by_cycles_and_resist_attacks() {
    fetch_debs();
    let d = Daemon::start();
    let tmp = d.dir.path();
    let store = common::cached_store("rv32", &["lockfiles/rv32.lock"]);

    // The image, its Verilator-built simulator and every task image, to the digests the
    // committed lockfile pins (built on another machine): from scratch where the store is new
    // (ci/test-cold.sh), else every blob hashed again.
    let o = arenactl()
        .args([
            "image",
            "verify",
            "--image-lock",
            "lockfiles/rv32.lock",
            "--store",
        ])
        .arg(&store)
        .env("ARENA_DEB_DIR", debs())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));

    let hidden = tmp.join("hidden");
    let o = arenactl()
        .args([
            "unseen", "generate", "--tasks", "tasks", "--seed", "7", "--out",
        ])
        .arg(&hidden)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));

    // Faster kernels: every task correct, faster in cycles, scored above 220; the speedup is
    // the baseline's cycles over the kernel's, paired on the same inputs; the unseen
    // configurations pass too.
    let unseen = ["--unseen", hidden.to_str().unwrap()];
    let fast = run(
        &d,
        &store,
        "ci/agents/optimize.toml",
        &tmp.join("fast"),
        &unseen,
    );
    for r in &fast {
        let s = score(r);
        assert!(s.correct && s.speedup > 1.2 && s.score > 220.0, "{r}");
        assert!(r["provenance"]["image"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"));
        let cases = r["candidate"]["performance"].as_array().unwrap();
        assert_eq!(cases.len(), 5, "{r}");
        for c in cases {
            let (b, k) = (cycles(c, "baseline_cycles"), cycles(c, "cycles"));
            assert!(k < b, "{c}");
            let ms = c["pairs_ms"][0].as_array().unwrap();
            assert_eq!(ms[0].as_f64().unwrap(), b as f64 / 100_000.0, "{c}");
            assert_eq!(ms[1].as_f64().unwrap(), k as f64 / 100_000.0, "{c}");
        }
        let u = &r["unseen"];
        for k in ["original_passed", "optimized_passed"] {
            let passed = u[k].as_array().unwrap_or_else(|| panic!("{k}: {u}"));
            assert!(passed.len() == 8 && passed.iter().all(|x| x == true), "{u}");
        }
    }

    // Wrong kernels: they compile and run, and correctness fails them all (score 20). The
    // baseline, timed again on new secret inputs, takes the same cycles where its control
    // flow does not depend on the data; ffn_i8's ReLU branches do, by about 1 %.
    let wrong = run(
        &d,
        &store,
        "ci/agents/wrong.toml",
        &tmp.join("wrong"),
        &unseen,
    );
    for (w, f) in wrong.iter().zip(&fast) {
        let s = score(w);
        assert!(s.compiled && !s.correct && s.score == 20.0, "{w}");
        let (bw, bf) = (baseline_cycles(w), baseline_cycles(f));
        if w["task_id"].as_str().unwrap().ends_with("ffn_i8") {
            for (x, y) in bw.iter().zip(&bf) {
                // 0.9 % apart at most over 30 draws on its smallest configuration.
                assert!((*x as f64 / *y as f64 - 1.0).abs() < 0.02, "{bw:?} {bf:?}");
            }
        } else {
            assert_eq!(bw, bf, "{}", w["task_id"]);
        }
        // Wrong on the unseen configurations too, each named by index and kind only: the
        // element that differs would tell a hidden configuration's sizes.
        let id = w["task_id"].as_str().unwrap().replace('/', "__");
        let report = tmp
            .join("wrong/tasks")
            .join(id)
            .join("r0/unseen/out/unseen_report.json");
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let errors = report["errors"]["candidate"].as_object().unwrap();
        assert_eq!(errors.len(), 8, "{report}");
        for e in errors.values() {
            let e = e.as_str().unwrap();
            assert!(e.ends_with(": wrong_output"), "{e}");
        }
    }

    // The adversaries (each expectation is in the agent file).
    let adv = run(
        &d,
        &store,
        "ci/agents/adversary/simulated.toml",
        &tmp.join("adversary"),
        &[],
    );
    let by = |name: &str| {
        adv.iter()
            .find(|r| r["task_id"].as_str().unwrap().ends_with(name))
            .unwrap()
    };
    let error = |r: &Value, gate: &str| {
        r["candidate"][gate]["error"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let gemm = by("gemm_i8");
    assert_eq!(score(gemm).score, 20.0, "{gemm}");
    assert!(error(gemm, "correctness").contains("expected"), "{gemm}");
    let conv = by("conv1d_i16");
    assert!(!score(conv).compiled, "{conv}");
    assert!(error(conv, "compile").contains("/arena/harness"), "{conv}");
    let sum = by("sum_sq_i16");
    assert_eq!(score(sum).score, 20.0, "{sum}");
    assert!(error(sum, "correctness").contains("status fault"), "{sum}");
    let fma = by("fma_chain_i32");
    assert_eq!(score(fma).score, 20.0, "{fma}");
    assert!(
        error(fma, "correctness").contains("status timeout"),
        "{fma}"
    );
    // Untouched: the same binary on the same inputs, so exactly as fast as itself.
    let ffn = by("ffn_i8");
    assert_eq!(score(ffn).speedup, 1.0, "{ffn}");
    for c in ffn["candidate"]["performance"].as_array().unwrap() {
        assert_eq!(cycles(c, "cycles"), cycles(c, "baseline_cycles"), "{c}");
    }

    // The agent's side: in its container the task's own gates build and simulate the kernel
    // (agents/scripted.toml runs a whole script: `&&`, `;`, redirections).
    let out = tmp.join("gates");
    let o = arenactl()
        .args(["run", "--image-lock", "lockfiles/rv32.lock", "--agent", "agents/scripted.toml"])
        .args(["--gpus", "cpu:1", "--containerd", &d.socket, "--store"])
        .arg(&store)
        .arg("--out")
        .arg(&out)
        .args(["--tasks", "c2rv32/kernelcraft/gemm_i8"])
        .env(
            "ARENA_AGENT_SCRIPT",
            "cd /workspace && python3 scripts/task_runner.py compile && \
             python3 scripts/task_runner.py correctness; python3 scripts/task_runner.py performance",
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let kept = out.join("tasks/c2rv32__kernelcraft__gemm_i8/r0/workspace.kept/build");
    let report: Value =
        serde_json::from_slice(&std::fs::read(kept.join("performance_report.json")).unwrap())
            .unwrap();
    assert_eq!(cycles(&report[0], "cycles"), 22652, "{report}");
    assert!(kept.join("correctness_report.json").is_file());
    assert!(empty(&d.leftovers()), "containers left behind");
}
