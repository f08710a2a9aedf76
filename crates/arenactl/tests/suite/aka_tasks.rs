//! AgentKernelArena tasks as AKA ships them (ci/fixtures/aka): their perf-helper stubs are
//! refused when the task is read, `arenactl task materialize` writes exactly what AKA's own
//! materializer (run here with python3) writes, and the copies are valid tasks with unseen sets.

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

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// Every file below `dir`, relative, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap() == "__pycache__" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn stubbed_helpers_are_refused_and_materialized_exactly_as_aka_does() {
    let fixture = repo().join("ci/fixtures/aka");
    let tasks = fixture.join("tasks");
    let tmp = tempfile::tempdir().unwrap();

    // As shipped, both tasks hold stubs that raise when run: refused, the file named.
    let o = arenactl(&["task", "validate", tasks.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("triton_expand/scripts/task_runner.py: perf helpers: holds AgentKernelArena's unmaterialized helper stubs"),
        "{t}"
    );
    assert!(
        t.contains("test_add_kernel/performance_utils_pytest.py: perf helpers: is AgentKernelArena's unmaterialized stub"),
        "{t}"
    );
    assert!(t.contains("arenactl task materialize --aka-root"), "{t}");

    // Materialized by arena…
    let out = tmp.path().join("materialized");
    let o = arenactl(&[
        "task",
        "materialize",
        "--aka-root",
        fixture.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        // No derived harness: the copies are compared with what AKA's materializer writes.
        "--no-derive",
        tasks.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let copied: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let copied = copied.as_array().unwrap();
    assert_eq!(copied.len(), 2);
    for c in copied {
        assert!(c["digest"].as_str().unwrap().starts_with("sha256:"), "{c}");
        assert_eq!(c["materialized"].as_array().unwrap().len(), 1, "{c}");
    }
    // …and by AKA's own materializer, on a copy of the checkout.
    let aka = tmp.path().join("aka");
    copy_dir(&fixture, &aka);
    let script = r#"
import glob, pathlib, sys
root = pathlib.Path(sys.argv[1])
sys.path.insert(0, str(root))
from src.perf_helper_materialization import materialize_perf_helpers_in_workspace
for cfg in sorted(glob.glob(str(root / "tasks/**/config.yaml"), recursive=True)):
    materialize_perf_helpers_in_workspace(pathlib.Path(cfg).parent, root=root)
"#;
    let st = Command::new("python3")
        .args(["-B", "-c", script])
        .arg(&aka)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(
        files(&out),
        files(&aka.join("tasks")),
        "not byte-identical to AKA's"
    );

    // The copies are valid tasks; the originals are untouched.
    let o = arenactl(&["task", "validate", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        arenactl(&["task", "validate", tasks.to_str().unwrap()])
            .status
            .code(),
        Some(1)
    );
    let set = tmp.path().join("set");
    let o = arenactl(&[
        "unseen",
        "generate",
        "--tasks",
        out.to_str().unwrap(),
        "--seed",
        "1",
        "--out",
        set.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(set
        .join("triton2triton__vllm__triton_expand.json")
        .is_file());

    // Nothing is overwritten: a second materialize into the same directory is refused.
    let o = arenactl(&[
        "task",
        "materialize",
        "--aka-root",
        fixture.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        tasks.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("not empty"), "{}", text(&o));
}
