//! The AgentKernelArena slice (ci/fixtures/aka-slice: 31 task directories of every task type,
//! copied unchanged from AKA): every task validates once its perf helpers are put in, unseen
//! generation reads the shapes of the tasks that declare them in any form arena reads, and no
//! generated configuration breaks a rule its task's visible configurations obey.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use arena_task::hidden::{set_violations, TaskUnseen};
use common::repo;

fn arenactl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_arenactl"))
        .args(args)
        .output()
        .expect("run arenactl")
}

/// `arenactl task materialize` of the slice at `slice` into `out`, with `rest`.
fn materialize(slice: &Path, out: &Path, rest: &[&str]) -> Output {
    let mut args = vec![
        "task",
        "materialize",
        "--aka-root",
        slice.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(rest);
    arenactl(&args)
}

fn json(o: &Output) -> serde_json::Value {
    // 3: partial (a task skipped for a reason that is a failure), still a full report.
    assert!(
        o.status.code().is_some_and(|c| c <= 1 || c == 3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn the_slice_validates_and_gets_unseen_sets_that_keep_its_rules() {
    let slice = repo().join("ci/fixtures/aka-slice");
    let tmp = tempfile::tempdir().unwrap();
    let mat = tmp.path().join("tasks");
    let o = materialize(&slice, &mat, &[slice.join("tasks").to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // 31 of 31 valid: the repository task without source_file_path included (AKA allows it).
    let v = json(&arenactl(&[
        "task",
        "validate",
        mat.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(
        (v["valid"].as_u64(), v["invalid"].as_u64()),
        (Some(31), Some(0)),
        "{v}"
    );

    // An instruction2triton task names no source file: the agent completes the kernel part
    // of the file its commands test, and the tests below the rule stay the task's.
    let v = json(&arenactl(&[
        "task",
        "show",
        mat.join("instruction2triton/rocmbench/naive_softmax")
            .to_str()
            .unwrap(),
        "--json",
    ]));
    assert_eq!(
        v["config"]["source_file_path"],
        serde_json::json!([]),
        "{v}"
    );
    assert_eq!(
        v["agent_files"],
        serde_json::json!(["naive_softmax.py"]),
        "{v}"
    );

    let hidden = tmp.path().join("hidden");
    let v = json(&arenactl(&[
        "unseen",
        "generate",
        "--tasks",
        mat.to_str().unwrap(),
        "--seed",
        "1",
        "--out",
        hidden.to_str().unwrap(),
        "--json",
    ]));
    let cov = &v["coverage"];
    // The counts as measured on this slice (docs/benchmarks.md): 27 sets; of the 4 others,
    // 1 declares its shapes only in the agent's own file (refk_identity's kernel.py), 2
    // build them by calls inside functions, and 1 has no problem dimension (test_load_reduce:
    // its only sizes are named as blocks). rocmbench's files hold the kernel and its tests
    // together: their tests are the task's (arena_task::split), so their declarations are
    // read there; triton_fla_l2norm's sizes are integers at the top of gen_inputs().
    assert_eq!(cov["tasks"], 31, "{cov}");
    assert_eq!(cov["with_set"], 27, "{cov}");
    assert_eq!(cov["agent_owned"], 1, "{cov}");
    assert_eq!(cov["no_declaration"], 2, "{cov}");
    assert_eq!(cov["failed"], 1, "{cov}");
    // Every set covers all six categories. Three are cubes or a square GEMM (every problem
    // dimension equals every other in every visible configuration): their asymmetric
    // configurations break that tie and say so, for a probe to settle.
    assert_eq!(cov["all_categories"], 27, "{cov}");
    assert!(cov["missing"].as_object().unwrap().is_empty(), "{cov}");
    assert_eq!(cov["breaks_tie"], 3, "{cov}");
    let skipped: Vec<String> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["task_id"].as_str().unwrap().to_string())
        .collect();
    for t in [
        "triton2triton/rocmbench/easy/test_load_reduce",
        "triton2triton/geak_eval/L1/refk_identity",
    ] {
        assert!(skipped.contains(&t.to_string()), "{t}: {skipped:?}");
    }
    let files: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["task_id"].as_str().unwrap())
        .collect();
    for t in [
        "triton2triton/rocmbench/easy/test_add_kernel",
        "instruction2triton/rocmbench/naive_softmax",
        "instruction2triton/rocmbench/rmsnorm_fwd",
        "instruction2triton/rocmbench/test_add_kernel",
        "triton2triton/vllm/triton_fla_l2norm",
    ] {
        assert!(files.contains(&t), "{t}: {files:?}");
    }

    // Zero configurations break a rule of their task's visible configurations.
    // The ids `unseen generate` writes: canonical ones (arena_task::canonical).
    let found = arena_task::canonical::discover_canonical(&mat)
        .unwrap()
        .tasks;
    let mut broken = Vec::new();
    let mut checked = 0;
    for f in v["files"].as_array().unwrap() {
        let id = f["task_id"].as_str().unwrap();
        let set: TaskUnseen = serde_json::from_slice(
            &std::fs::read(hidden.join(f["file"].as_str().unwrap())).unwrap(),
        )
        .unwrap();
        let dir = &found.iter().find(|t| t.id == id).unwrap().dir;
        let task = arena_task::Task::load(dir, id).unwrap();
        checked += set.configs.len();
        broken.extend(set_violations(&task, &set).unwrap());
        if id == "image_kernel/mi300x_sglang_triton_gemm" {
            // Its timed list (PERF_CASES, labelled) is rewritten with the checked one: the
            // performance command times unseen configurations, none of the visible labels.
            let harness = std::fs::read_to_string(dir.join(&set.harness)).unwrap();
            let entries: Vec<String> = set.configs.iter().map(|c| c.entry.clone()).collect();
            let decl = arena_task::declarations::Declaration::parse(&set.declaration);
            let out = arena_task::declarations::rewrite(&harness, &decl, &entries).unwrap();
            assert!(harness.contains("gemm_m4096_n4096_k4096"));
            assert!(!out.contains("gemm_m4096_n4096_k4096"), "{out}");
            assert!(
                out.contains(&format!("(\"unseen0\", {})", entries[0])),
                "{out}"
            );
        }
    }
    assert!(checked >= 27 * 8, "{checked}");
    assert!(broken.is_empty(), "{broken:#?}");

    // Other seeds, other sets: the same coverage, and still no rule broken.
    for seed in ["2", "5", "8"] {
        let out = tmp.path().join(format!("hidden-{seed}"));
        let v = json(&arenactl(&[
            "unseen",
            "generate",
            "--tasks",
            mat.to_str().unwrap(),
            "--seed",
            seed,
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]));
        assert_eq!(v["coverage"]["all_categories"], 27, "seed {seed}: {v}");
        for f in v["files"].as_array().unwrap() {
            let id = f["task_id"].as_str().unwrap();
            let set: TaskUnseen = serde_json::from_slice(
                &std::fs::read(out.join(f["file"].as_str().unwrap())).unwrap(),
            )
            .unwrap();
            let dir = &found.iter().find(|t| t.id == id).unwrap().dir;
            let task = arena_task::Task::load(dir, id).unwrap();
            let broken = set_violations(&task, &set).unwrap();
            assert!(broken.is_empty(), "seed {seed}: {broken:#?}");
        }
    }
}

/// arena's trusted harnesses for the slice's tasks (tasks/aka-harnesses): each names a task of
/// the slice, `task materialize --harnesses` puts it into exactly that task's copy (named in
/// its config.yaml, covered by its digest), and the file it names as the kernel's is one the
/// task declares as the agent's. Whether each passes its task's kernel and fails a wrong
/// output is checked by ci/aka-harness-check.py (in ci/bench/cuda-pytorch.sh, with torch).
#[test]
fn trusted_harnesses_go_into_the_tasks_they_name() {
    let slice = repo().join("ci/fixtures/aka-slice");
    let harnesses = repo().join("tasks/aka-harnesses");
    let tmp = tempfile::tempdir().unwrap();
    let mat = tmp.path().join("tasks");
    let v = json(&materialize(
        &slice,
        &mat,
        &[
            "--harnesses",
            harnesses.to_str().unwrap(),
            slice.join("tasks/triton2triton").to_str().unwrap(),
            "--json",
        ],
    ));
    let with: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["harness"].as_str() == Some("arena_harness.py"))
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    let mut shipped: Vec<String> = common::files_below(&harnesses)
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(harnesses.join("triton2triton")).unwrap();
            rel.with_extension("").display().to_string()
        })
        .collect();
    shipped.sort();
    assert_eq!(
        with, shipped,
        "every harness goes into the task it names, and only there"
    );
    assert_eq!(with.len(), 9);
    for id in &with {
        let show = json(&arenactl(&[
            "task",
            "show",
            "--root",
            mat.to_str().unwrap(),
            id,
            "--json",
        ]));
        assert_eq!(
            show["config"]["trusted_harness"], "arena_harness.py",
            "{id}"
        );
        let text = std::fs::read_to_string(mat.join(id).join("arena_harness.py")).unwrap();
        let source = text
            .lines()
            .find_map(|l| l.strip_prefix("SOURCE = \""))
            .and_then(|l| l.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{id}: no SOURCE line"));
        let agents: Vec<&str> = show["agent_files"]
            .as_array()
            .unwrap_or_else(|| panic!("{id}: {show}"))
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            agents.contains(&source),
            "{id}: {source} is not among {agents:?}"
        );
    }
}
