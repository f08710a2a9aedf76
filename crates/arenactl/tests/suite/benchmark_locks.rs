//! The benchmark sets' lockfiles: lockfiles/aka-cuda.lock pins AgentKernelArena's
//! 196 Triton tasks as `arenactl task materialize` writes them from AKA's commit d6f7c8a4, and
//! lockfiles/kernelbench-cuda.lock KernelBench's 250 problems of levels 1-3 as `arenactl task
//! import kernelbench` writes them from commit 423217d (ci/lock-benchmarks.sh). The fixture
//! slices are copies of those commits' files: the tasks arena makes from them today must have
//! the digests the lockfiles pin, or the lockfiles are stale (a change to arena's harnesses,
//! its deriver or its importer needs `ci/lock-benchmarks.sh … --relock`).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::daemon::{arenactl, show};
use common::repo;

/// Task id → digest of every task at or below `dir`.
fn digests(dir: &Path) -> BTreeMap<String, String> {
    let o = arenactl()
        .args(["task", "digest", "--json"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_string(),
                t["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Task id → the digest a lockfile pins.
fn pinned(lockfile: &str) -> BTreeMap<String, String> {
    let lock = arena_image::Lockfile::load(&repo().join(lockfile)).unwrap();
    lock.images
        .iter()
        .filter_map(|i| Some((i.task.clone()?, i.task_digest.clone()?)))
        .collect()
}

#[test]
fn the_aka_lockfile_pins_the_tasks_materialize_writes_from_the_fixture_slice() {
    let lock = pinned("lockfiles/aka-cuda.lock");
    assert_eq!(lock.len(), 196, "AKA's Triton tasks an NVIDIA GPU runs");
    let out = tempfile::tempdir().unwrap();
    let slice = repo().join("ci/fixtures/aka-slice");
    let o = arenactl()
        .args(["task", "materialize", "--aka-root"])
        .arg(&slice)
        .arg("--out")
        .arg(out.path().join("t"))
        .args(["--harnesses", "tasks/aka-harnesses"])
        .arg(slice.join("tasks"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    // The fixture's copies of these lost the executable bit AKA's tree gives one of their
    // files (the same bytes; a task digest covers the bit).
    let modes_lost = [
        "instruction2triton/rocmbench/naive_softmax",
        "instruction2triton/rocmbench/rmsnorm_fwd",
        "instruction2triton/rocmbench/test_add_kernel",
        "triton2triton/geak_eval/L1/llama_ff_triton",
    ];
    let mut matched = Vec::new();
    for (id, digest) in digests(&out.path().join("t")) {
        let Some(locked) = lock.get(&id) else {
            continue; // AMD-only task types: not in the NVIDIA set
        };
        if modes_lost.contains(&id.as_str()) {
            assert_ne!(locked, &digest, "{id}: the fixture now keeps its modes");
            continue;
        }
        assert_eq!(locked, &digest, "{id}: lockfiles/aka-cuda.lock is stale");
        matched.push(id);
    }
    assert!(matched.len() >= 9, "{matched:?}");
    assert!(matched
        .iter()
        .any(|id| id.starts_with("triton2triton/vllm/")));
}

#[test]
fn the_kernelbench_lockfile_pins_the_tasks_import_writes_from_the_fixture_slice() {
    let lock = pinned("lockfiles/kernelbench-cuda.lock");
    assert_eq!(lock.len(), 250, "KernelBench's levels 1-3");
    let out = tempfile::tempdir().unwrap();
    let o = arenactl()
        .args(["task", "import", "kernelbench"])
        .arg(repo().join("ci/fixtures/kernelbench-slice"))
        .arg("--out")
        .arg(out.path().join("t"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let found = digests(&out.path().join("t"));
    assert_eq!(found.len(), 24);
    for (id, digest) in &found {
        assert_eq!(
            lock.get(id),
            Some(digest),
            "{id}: lockfiles/kernelbench-cuda.lock is stale"
        );
    }
}
