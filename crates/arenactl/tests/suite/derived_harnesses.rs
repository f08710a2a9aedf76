//! Trusted harnesses derived from AgentKernelArena's task runners (arena_task::derive), on all
//! 118 of its triton2triton/vllm tasks (ci/fixtures/aka-vllm): `task materialize` writes one
//! into every task whose runner has the form the evaluator follows (arena's hand-written
//! harnesses win where there is one), says per family how many a run trusts, and names for
//! every other task the file and the construct; `task list` and `task show` say the same
//! before any run. Whether each derived harness passes its task's kernel and fails wrong
//! outputs is ci/aka-derived-check.py's (torch needed), and on a GPU ci/gpu/adversary-suite.py's.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::repo;

fn arenactl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_arenactl"))
        .args(args)
        .output()
        .expect("run arenactl")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

fn materialize(out: &Path, json: bool) -> Output {
    let mut args = vec![
        "task".to_string(),
        "materialize".into(),
        "--aka-root".into(),
        repo().join("ci/fixtures/aka-slice").display().to_string(),
        "--harnesses".into(),
        repo().join("tasks/aka-harnesses").display().to_string(),
        "--out".into(),
        out.display().to_string(),
        repo()
            .join("ci/fixtures/aka-vllm/tasks")
            .display()
            .to_string(),
    ];
    if json {
        args.push("--json".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    arenactl(&args)
}

#[test]
fn vllm_tasks_are_trusted_by_derived_harnesses_or_say_why_not() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tasks");
    let v = json(&materialize(&out, true));
    let copies = v.as_array().unwrap();
    assert_eq!(copies.len(), 118);
    let mut derived = 0;
    let mut arena = 0;
    let mut reasons = Vec::new();
    for c in copies {
        let id = c["id"].as_str().unwrap();
        let t = &c["trust"];
        match (t["level"].as_str(), t["harness"].as_str()) {
            (Some("trusted"), Some("derived")) => {
                derived += 1;
                let text = std::fs::read_to_string(out.join(id).join("arena_harness.py")).unwrap();
                assert!(
                    text.starts_with(arena_task::derive::DERIVED_MARKER),
                    "{id}: {text}"
                );
                assert!(
                    text.contains("runner=\"scripts/task_runner.py\""),
                    "{id}: {text}"
                );
            }
            (Some("trusted"), Some("arena")) => arena += 1,
            (Some("self_reported"), None) => {
                let why = t["reason"].as_str().unwrap_or_default().to_string();
                assert!(
                    why.contains(&format!("{id}/scripts/task_runner.py: ")),
                    "{id}: {why}"
                );
                reasons.push(why);
            }
            other => panic!("{id}: {other:?} in {c}"),
        }
    }
    // The 6 vllm tasks arena wrote a harness for keep it.
    assert_eq!(arena, 6);
    let trusted = derived + arena;
    assert!(
        trusted * 100 >= 85 * copies.len(),
        "{trusted} of {} trusted; the rest: {reasons:#?}",
        copies.len()
    );
    // What the runner's text shows arena cannot follow: the entry called several times per
    // configuration (5 of these tasks), raw pointers (batch_memcpy).
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("times per configuration")),
        "{reasons:#?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("raw device pointers")),
        "{reasons:#?}"
    );

    // The same before any run: `task list` and `task show`.
    let list = json(&arenactl(&[
        "task",
        "list",
        out.to_str().unwrap(),
        "--json",
    ]));
    let listed = list.as_array().unwrap();
    let by_list = listed
        .iter()
        .filter(|e| e["trust"]["harness"] == "derived")
        .count();
    assert_eq!(by_list, derived);
    let show = json(&arenactl(&[
        "task",
        "show",
        out.join("triton2triton/vllm/triton_rms_norm")
            .to_str()
            .unwrap(),
        "--json",
    ]));
    assert_eq!(show["trust"]["level"], "trusted", "{show}");
    assert_eq!(show["trust"]["harness"], "derived", "{show}");
    let show = json(&arenactl(&[
        "task",
        "show",
        out.join("triton2triton/vllm/triton_batch_memcpy")
            .to_str()
            .unwrap(),
        "--json",
    ]));
    assert_eq!(show["trust"]["level"], "self_reported", "{show}");
}

#[test]
fn materialize_says_per_family_how_many_a_run_trusts() {
    let tmp = tempfile::tempdir().unwrap();
    let o = materialize(&tmp.path().join("tasks"), false);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("triton2triton: 118 tasks:"))
        .unwrap_or_else(|| panic!("no family line in:\n{text}"));
    assert!(
        line.contains("trusted (derived)") && line.contains("6 trusted (arena)"),
        "{line}"
    );
    assert!(line.contains("self_reported"), "{line}");
}
