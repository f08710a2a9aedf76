//! Property tests of the harness reports arena reads: a self-reported task's
//! reports are written by the task's harness in the process where the agent's kernel runs, so
//! they are whatever that kernel makes them. Any edit of real reports (AgentKernelArena's
//! compile, correctness and performance reports, and a list of cases as arena's evaluator
//! writes them) is read into gates without a panic, and every time read is a number.
//! Inputs that once failed are kept beside this file (`.proptest-regressions`).

use std::path::{Path, PathBuf};

use arena_eval::aka_perf::{Side, Writer};
use arena_eval::collect::{collect, Reading};
use arena_mutate::{one_edited, Format};
use proptest::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const BUILD: &str = "ci/fixtures/aka-slice/tasks/triton2triton/vllm/triton_logit_bias/build";
const REPORTS: &[&str] = &[
    "compile_report.json",
    "correctness_report.json",
    "performance_report.json",
];
/// A performance report as a list of cases with parameters, pairing keys and a method.
const CASES: &str = r#"[{"test_case_id": "perf1", "execution_time_ms": 0.04, "params": {"batch": 4},
  "benchmark_method": "cuda_graph", "pairs_ms": [[0.04, 0.05], [0.041, 0.05]]},
 {"test_case_id": "perf2", "execution_time_ms": -1.0, "params": {"batch": 8}}]"#;

fn base(i: usize) -> String {
    if i == REPORTS.len() {
        return CASES.to_string();
    }
    std::fs::read_to_string(repo().join(BUILD).join(REPORTS[i])).unwrap()
}

fn an_edited_report() -> impl Strategy<Value = (usize, Vec<u8>)> {
    one_edited((0..=REPORTS.len()).map(base).collect(), Format::Json)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn edited_reports_are_read_into_gates_without_a_panic(
        (i, bytes) in an_edited_report(),
        arena in any::<bool>(),
        torch2hip in any::<bool>(),
    ) {
        let d = tempfile::tempdir().unwrap();
        let build = d.path().join("build");
        std::fs::create_dir(&build).unwrap();
        for (j, name) in REPORTS.iter().enumerate() {
            // The list of cases (the last base) stands in for the performance report.
            let edited = j == i || (j == 2 && i == REPORTS.len());
            let text = if edited { bytes.clone() } else { base(j).into_bytes() };
            std::fs::write(build.join(name), text).unwrap();
        }
        std::fs::write(d.path().join("gates"), "compile 0\ncorrectness 0\nperformance 0\n").unwrap();
        let how = Reading {
            task_type: if torch2hip { "torch2hip" } else { "triton2triton" },
            side: Side::Candidate,
            writer: if arena { Writer::Arena } else { Writer::Harness },
        };
        let e = collect(d.path(), d.path(), None, how);
        for c in &e.performance {
            prop_assert!(c.execution_time_ms.is_finite(), "{c:?}");
        }
    }
}
