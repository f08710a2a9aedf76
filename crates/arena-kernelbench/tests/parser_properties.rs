//! Property tests of KernelBench problem files: `arenactl task import kernelbench`
//! reads whatever Python files a lab points it at, so any text, and any edit of a real
//! problem, must become a task arena can load or be skipped with a reason naming the file,
//! never a panic. Inputs that once failed are kept beside this file (`.proptest-regressions`)
//! and run first.

use std::path::{Path, PathBuf};

use arena_kernelbench::{import, Problem};
use arena_mutate::{apply_bytes, byte_edits, noise};
use proptest::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Real problems of level 1: a matmul, an activation, a scan and a reduction.
const FILES: &[&str] = &[
    "ci/fixtures/kernelbench-cpu/level1/1_Square_matrix_multiplication_.py",
    "ci/fixtures/kernelbench-cpu/level1/25_Swish.py",
    "ci/fixtures/kernelbench-cpu/level1/89_cumsum.py",
    "ci/fixtures/kernelbench-cpu/level1/49_Max_reduction_over_a_dimension.py",
];

fn an_edited_problem() -> impl Strategy<Value = Vec<u8>> {
    let texts: Vec<Vec<u8>> = FILES
        .iter()
        .map(|f| std::fs::read(repo().join(f)).unwrap())
        .collect();
    (0..texts.len(), byte_edits()).prop_map(move |(i, e)| apply_bytes(&texts[i], &e))
}

/// The file imported alone: a task whose directory arena loads, with the constants read from
/// the file, or the file skipped naming it and why.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let d = tempfile::tempdir().unwrap();
    let from = d.path().join("kb");
    std::fs::create_dir_all(from.join("level1")).unwrap();
    std::fs::write(from.join("level1/7_Problem.py"), bytes).unwrap();
    let out = d.path().join("tasks");
    let imported = import(&from, &out).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(imported.tasks.len() + imported.skipped.len(), 1);
    for s in &imported.skipped {
        prop_assert_eq!(&s.file, "level1/7_Problem.py");
        prop_assert!(!s.reason.is_empty());
    }
    for t in &imported.tasks {
        prop_assert_eq!(&t.id, "level1/7_Problem");
        let source = String::from_utf8(bytes.to_vec()).unwrap();
        for (name, _) in &t.configuration {
            prop_assert!(
                source.contains(name.as_str()),
                "{} is not in the file",
                name
            );
        }
        let task = arena_task::Task::load(&out.join(&t.id), &t.id);
        prop_assert!(
            task.is_ok(),
            "the task written does not load: {}",
            task.unwrap_err()
        );
    }
    Ok(())
}

#[test]
fn the_real_problems_are_read_with_their_sizes() {
    for f in FILES {
        let source = std::fs::read_to_string(repo().join(f)).unwrap();
        let p = Problem::read(f, "level1/x".into(), source).unwrap();
        assert!(!p.shape_constants.is_empty(), "{f}");
        assert!(p.model_new().contains("class ModelNew"), "{f}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn an_edited_problem_becomes_a_task_or_is_skipped_naming_the_file(bytes in an_edited_problem()) {
        check(&bytes)?;
    }

    #[test]
    fn any_text_becomes_a_task_or_is_skipped_naming_the_file(text in noise()) {
        check(text.as_bytes())?;
    }
}
