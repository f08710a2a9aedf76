use super::*;
use std::fs;

fn run_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let p = d.path().join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    d
}

fn ids_and_ms(r: &Run) -> Vec<(String, f64)> {
    r.cases
        .iter()
        .map(|c| (c.test_case_id.clone(), c.execution_time_ms))
        .collect()
}

#[test]
fn a_vllm_report_under_build_comes_first_with_its_parameters() {
    let d = run_dir(&[
        (
            "performance_report.json",
            r#"[{"test_case_id":"perf1","execution_time_ms":0.04,"params":{"batch":4},"benchmark_method":"cuda_graph"},
                {"test_case_id":"perf2","execution_time_ms":-1.0,"params":{"batch":8}}]"#,
        ),
        // A stale-looking second report: never read while build/'s holds cases.
        (
            "alt/perf-benchmark_results.json",
            r#"[{"timing_ms":{"mean":9.0}}]"#,
        ),
    ]);
    let r = read_run(d.path(), "triton2triton", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(r.source, "build/performance_report.json");
    assert_eq!(
        ids_and_ms(&r),
        [("perf1".into(), 0.04), ("perf2".into(), -1.0)]
    );
    assert_eq!(r.cases[0].extra["params"]["batch"], 4);
    assert!(!r.cases[1].measured());
}

#[test]
fn rocmbench_results_are_read_by_their_mean_and_numbered_as_aka_numbers_them() {
    let d = run_dir(&[(
        "alt/perf-benchmark_results.json",
        r#"[{"op_name":"add","params":{"SIZE":98432},"timing_ms":{"mean":0.0101,"median":0.01,"min":0.009}},
            {"op_name":"add","params":{"SIZE":1048576},"timing_ms":{"median":0.05}}]"#,
    )]);
    let r = read_run(d.path(), "triton2triton", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(r.source, "perf/benchmark_results.json");
    assert_eq!(
        ids_and_ms(&r),
        [("test_case_0".into(), 0.0101), ("test_case_1".into(), 0.05)]
    );
    assert_eq!(r.cases[0].extra["time_key"], "timing_ms.mean");
}

#[test]
fn a_geak_harness_is_read_from_its_printed_latency() {
    let out = "Benchmarking 25 shapes (warmup=50, iterations=200)...\n  warm-up took 3 ms\n  \
               (1, 128, 4096): kernel=0.0700 ms | ref=0.1000 ms | speedup=1.43x\n\
               Geometric mean speedup: 1.430x\nMedian kernel latency: 0.0700 ms\n\
               GEAK_RESULT_LATENCY_MS=0.070000\nGEAK_RESULT_GEOMEAN_SPEEDUP=1.4300\n";
    let d = run_dir(&[(OUTPUT, out)]);
    let r = read_run(d.path(), "triton2triton", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(r.source, "output: GEAK_RESULT_LATENCY_MS");
    assert_eq!(ids_and_ms(&r), [("test_case_0".into(), 0.07)]);
}

#[test]
fn printed_cases_and_performance_lines() {
    let d = run_dir(&[(OUTPUT, "Test case 0: 1.5 ms\nTest case 1: 2.25 ms\n")]);
    let r = read_run(d.path(), "hip2hip", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(
        ids_and_ms(&r),
        [("test_case_0".into(), 1.5), ("test_case_1".into(), 2.25)]
    );
    let d = run_dir(&[(OUTPUT, "Shape [256, 512]: 0.5 ms\n")]);
    let r = read_run(d.path(), "hip2hip", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(r.cases[0].test_case_id, "shape_0");
    assert_eq!(r.cases[0].extra["shape"], serde_json::json!([256, 512]));
    let d = run_dir(&[(OUTPUT, "Performance: 3.5 ms\nPerformance: 4 ms\n")]);
    let r = read_run(d.path(), "hip2hip", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(
        ids_and_ms(&r),
        [("perf_0".into(), 3.5), ("perf_1".into(), 4.0)]
    );
    // vLLM's summary line names no case of its own.
    let d = run_dir(&[(OUTPUT, "elapsed time: 0.25 s\n")]);
    let r = read_run(d.path(), "hip2hip", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(ids_and_ms(&r), [("test_case_0".into(), 250.0)]);
}

#[test]
fn torch2hip_reports_are_read_by_kernel() {
    let report = r#"[{"test_case_id":"t0","ori_time":2.0,"opt_time":0.5}]"#;
    let d = run_dir(&[("performance_report.json", report)]);
    let base = read_run(d.path(), "torch2hip", Side::Baseline, Writer::Harness).unwrap();
    let cand = read_run(d.path(), "torch2hip", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(base.cases[0].execution_time_ms, 2.0);
    assert_eq!(cand.cases[0].execution_time_ms, 0.5);
    // Other types read the standard keys only: this report has none.
    assert!(read_run(d.path(), "triton2triton", Side::Candidate, Writer::Harness).is_err());
}

#[test]
fn other_report_shapes_as_aka_reads_them() {
    let d = run_dir(&[(
        "alt/perf_report.json",
        r#"{"test_cases":[{"time_ms":"0.5"},{"execution_time":2500}]}"#,
    )]);
    let r = read_run(d.path(), "hip2hip", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(r.source, "perf_report.json");
    // A bare time of 1000 or more is taken as seconds, as AKA does.
    assert_eq!(
        ids_and_ms(&r),
        [
            ("test_case_0".into(), 0.5),
            ("test_case_1".into(), 2_500_000.0)
        ]
    );
    let d = run_dir(&[(
        "alt/performance_report.json",
        r#"{"kernel_ms": 0.2, "ref_ms": 0.4, "shape": [4]}"#,
    )]);
    let r = read_run(d.path(), "hip2hip", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(
        ids_and_ms(&r),
        [("kernel_0".into(), 0.2), ("ref_1".into(), 0.4)]
    );
    let d = run_dir(&[("performance_report.json", r#"{"bytes_per_second_gs": 4.0}"#)]);
    let r = read_run(d.path(), "hip2hip", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(r.cases[0].execution_time_ms, 0.25);
}

#[test]
fn not_a_number_is_a_failed_case_that_says_so() {
    // Python's json writes NaN and Infinity; JSON cannot hold them: the case fails, named.
    let d = run_dir(&[(
        "performance_report.json",
        r#"[{"test_case_id":"perf1","execution_time_ms":NaN},{"test_case_id":"perf2","execution_time_ms":Infinity}]"#,
    )]);
    let r = read_run(d.path(), "triton2triton", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(
        ids_and_ms(&r),
        [("perf1".into(), -1.0), ("perf2".into(), -1.0)]
    );
    assert_eq!(r.cases[0].extra["reported"], "NaN");
    assert_eq!(r.cases[1].extra["reported"], "inf");
    // What is kept can be written as JSON and read back.
    let text = serde_json::to_string(&r.cases).unwrap();
    let back: Vec<PerfCase> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r.cases);
}

#[test]
fn nothing_found_says_where_it_looked_and_no_stray_number_is_taken() {
    let d = run_dir(&[
        ("performance_report.json", "[{\"params\": {}}]"),
        ("alt/perf_report.json", "not json"),
        (OUTPUT, "warm-up took 3 ms\nloaded in 2.5 s\n"),
    ]);
    let err = read_run(d.path(), "triton2triton", Side::Candidate, Writer::Harness).unwrap_err();
    assert!(
        err.contains("build/performance_report.json: no case with a time"),
        "{err}"
    );
    assert!(err.contains("perf_report.json: unreadable"), "{err}");
    assert!(err.contains("no time printed"), "{err}");
}

#[test]
fn a_report_that_is_a_link_is_refused_and_not_followed() {
    let d = run_dir(&[(OUTPUT, "GEAK_RESULT_LATENCY_MS=0.5\n")]);
    let host = d.path().join("host.json");
    fs::write(&host, r#"[{"test_case_id":"x","execution_time_ms":1e-9}]"#).unwrap();
    std::os::unix::fs::symlink(&host, d.path().join("performance_report.json")).unwrap();
    let r = read_run(d.path(), "triton2triton", Side::Candidate, Writer::Harness).unwrap();
    assert_eq!(ids_and_ms(&r), [("test_case_0".into(), 0.5)]);
}

#[test]
fn a_report_cannot_hand_the_scorer_pairs_of_its_own() {
    // An honest-looking time, and a "paired baseline" 1000 times slower beside it.
    let d = run_dir(&[(
        "performance_report.json",
        r#"[{"test_case_id":"perf1","execution_time_ms":1.0,"baseline_ms":1000.0,
             "pairs_ms":[[1000.0,1.0],[1000.0,1.0]],"paired_by":"round","params":{"n":4},
             "compiled_ms":1000.0,"compiled_pairs_ms":[[1000.0,1.0],[1000.0,1.0]],
             "cycles":1,"baseline_cycles":1000000}]"#,
    )]);
    let r = read_run(d.path(), "triton2triton", Side::Candidate, Writer::Harness).unwrap();
    let c = &r.cases[0];
    for k in [
        "baseline_ms",
        "pairs_ms",
        "paired_by",
        "compiled_ms",
        "compiled_pairs_ms",
        // The report page's cycles (a simulated task's).
        "cycles",
        "baseline_cycles",
    ] {
        assert!(!c.extra.contains_key(k), "{k} kept: {c:?}");
    }
    assert_eq!(c.pairing, Default::default(), "{c:?}");
    assert_eq!(c.extra["params"]["n"], 4);
    // Arena's own evaluator writes them: kept, read as its pairing.
    let r = read_run(d.path(), "triton2triton", Side::Candidate, Writer::Arena).unwrap();
    let p = &r.cases[0].pairing;
    assert!(
        p.baseline_ms.is_some()
            && p.pairs_ms.is_some()
            && p.paired_by.is_some()
            && p.compiled_pairs_ms.is_some(),
        "dropped: {:?}",
        r.cases[0]
    );
    assert!(!r.cases[0].extra.contains_key("pairs_ms"));
}

#[test]
fn deeply_nested_reports_are_refused_without_parsing_them_deeply() {
    // serde_json refuses this; JSON5 would recurse once per bracket (on a 2 MiB stack, 5000
    // of them overflowed it). Run on half that stack: only serde_json's 128 levels recurse.
    let deep = "[".repeat(5000) + "NaN" + &"]".repeat(5000);
    let d = run_dir(&[("performance_report.json", deep.as_str())]);
    let path = d.path().to_path_buf();
    let err = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || read_run(&path, "triton2triton", Side::Candidate, Writer::Harness))
        .unwrap()
        .join()
        .unwrap()
        .unwrap_err();
    assert!(err.contains("unreadable"), "{err}");
    assert_eq!(nesting(r#"{"a": "[[[[", "b": [1, {"c": 2}]}"#), 3);
}

/// A case's `error` is the typed field whoever wrote it: text as it is, another JSON value as
/// its text, and it survives a write and a read.
#[test]
fn a_cases_error_is_typed_whatever_its_writer_wrote() {
    let d = run_dir(&[(
        "performance_report.json",
        r#"[{"test_case_id":"perf1","execution_time_ms":-1,"error":"boom"},{"test_case_id":"perf2","execution_time_ms":-1,"error":{"code":5}},{"test_case_id":"perf3","execution_time_ms":1.5,"error":null}]"#,
    )]);
    for writer in [Writer::Harness, Writer::Arena] {
        let r = read_run(d.path(), "triton2triton", Side::Candidate, writer).unwrap();
        let errors: Vec<Option<&str>> = r.cases.iter().map(|c| c.error.as_deref()).collect();
        assert_eq!(
            errors,
            [Some("boom"), Some(r#"{"code":5}"#), None],
            "{writer:?}"
        );
        assert!(r.cases.iter().all(|c| !c.extra.contains_key("error")));
        let back: Vec<PerfCase> =
            serde_json::from_str(&serde_json::to_string(&r.cases).unwrap()).unwrap();
        assert_eq!(back, r.cases);
    }
}
