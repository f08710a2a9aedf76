//! Property tests of what a report reads: result files come from other machines and
//! other versions, so any edit of a real one must be read or refused naming the file, and a
//! file that is read must make a report, every format of it, without a panic (a NaN time, an
//! empty list of pairs, a gate without a status). Inputs that once failed are kept beside
//! this file (`.proptest-regressions`) and run first.

use std::path::{Path, PathBuf};

use arena_mutate::{one_edited, Format};
use arena_report::{load_results, Report};
use proptest::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// An example result set, and two task runs of an H200 run (a trusted derived harness whose
/// candidate passed, and one whose performance gate failed).
const FILES: &[&str] = &[
    "ci/examples/results.json",
    "ci/fixtures/results/h200-derived.json",
];

fn an_edited_result_file() -> impl Strategy<Value = Vec<u8>> {
    let texts = FILES
        .iter()
        .map(|f| std::fs::read_to_string(repo().join(f)).unwrap());
    one_edited(texts.collect(), Format::Json).prop_map(|(_, b)| b)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn an_edited_result_file_is_reported_or_refused_naming_the_file(bytes in an_edited_result_file()) {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("results.json");
        std::fs::write(&path, &bytes).unwrap();
        match load_results(&path) {
            Err(e) => prop_assert!(e.to_string().contains(&path.display().to_string()), "{e}"),
            Ok(results) => {
                if let Ok(report) = Report::build(&results) {
                    let _ = report.markdown();
                    let _ = serde_json::to_string(&report).unwrap();
                    let info = arena_report::html::PageInfo {
                        title: "t".into(),
                        run_id: None,
                        link_base: String::new(),
                    };
                    let _ = arena_report::html::render(&report, &results, &info);
                }
            }
        }
    }
}

#[test]
fn the_files_read_as_they_are() {
    for f in FILES {
        let results = load_results(&repo().join(f)).unwrap();
        Report::build(&results).unwrap();
    }
}
