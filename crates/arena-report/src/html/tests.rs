use super::*;
use crate::fixture;

fn page(results: &[TaskResult]) -> (Report, String) {
    let report = Report::build(results).unwrap();
    let html = render(
        &report,
        results,
        &PageInfo {
            title: "arena report".into(),
            run_id: Some("rfixture".into()),
            link_base: String::new(),
        },
    );
    (report, html)
}

/// The `data-value` of the cell `key` in the row whose `data-type` is `row`.
fn cell(html: &str, table: &str, row: &str, key: &str) -> String {
    let t = &html[html.find(&format!("<table id=\"{table}\"")).unwrap()..];
    let t = &t[..t.find("</table>").unwrap()];
    let r = &t[t.find(&format!("<tr data-type=\"{row}\"")).unwrap()..];
    let r = &r[..r.find("</tr>").unwrap()];
    let at = r
        .find(&format!("data-key=\"{key}\" data-value=\""))
        .unwrap();
    let rest = &r[at + format!("data-key=\"{key}\" data-value=\"").len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

fn svgs(html: &str) -> Vec<&str> {
    html.match_indices("<svg")
        .map(|(i, _)| &html[i..i + html[i..].find("</svg>").unwrap() + 6])
        .collect()
}

#[test]
fn the_numbers_on_the_page_are_the_reports() {
    let results = fixture::run(21, 2, 1.0, 7).tasks;
    let (report, html) = page(&results);
    let json = serde_json::to_value(&report).unwrap();
    for a in json["aggregates"].as_array().unwrap() {
        let ty = a["task_type"].as_str().unwrap();
        for key in [
            "mean_speedup",
            "mean_score",
            "compile_rate",
            "correct_rate",
            "fast1",
            "fast2",
        ] {
            let on_page: f64 = cell(&html, "aggregates", ty, key).parse().unwrap();
            assert_eq!(on_page, a[key].as_f64().unwrap(), "{ty} {key}");
        }
        let g = cell(&html, "aggregates", ty, "geomean_speedup");
        assert_eq!(g.parse::<f64>().ok(), a["geomean_speedup"].as_f64(), "{ty}");
    }
    for n in json["noise_aware"].as_array().unwrap() {
        let ty = n["task_type"].as_str().unwrap();
        for key in ["fast1", "fast2", "with_interval"] {
            let on_page: f64 = cell(&html, "noise", ty, key).parse().unwrap();
            assert_eq!(on_page, n[key].as_f64().unwrap(), "noise {ty} {key}");
        }
    }
    for g in json["generalization"].as_array().unwrap() {
        let ty = g["task_type"].as_str().unwrap();
        let on_page: f64 = cell(&html, "generalization", ty, "both_pass")
            .parse()
            .unwrap();
        assert_eq!(on_page, g["quadrants"]["both_pass"].as_f64().unwrap());
    }
    // One row per task run, each with its score as the report has it.
    let rows = html.matches("<tr class=\"pass\" data-task=").count()
        + html.matches("<tr class=\"fail\" data-task=").count();
    assert_eq!(rows, 42);
    let first = &report.tasks[0];
    let row = &html[html
        .find(&format!("data-task=\"{}\"", first.task_id))
        .unwrap()..];
    assert!(row.contains(&format!(
        "data-key=\"score\" data-value=\"{}\"",
        first.score
    )));
}

#[test]
fn every_plot_is_well_formed_svg() {
    let results = fixture::run(12, 1, 1.0, 3).tasks;
    let (_, html) = page(&results);
    let plots = svgs(&html);
    assert_eq!(plots.len(), 4);
    for (id, svg) in ["plot-speedup", "plot-fastp", "plot-unseen", "plot-scores"]
        .iter()
        .zip(&plots)
    {
        assert!(html.contains(&format!("<figure id=\"{id}\">")));
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{id}: {e}"));
        let marks = doc
            .descendants()
            .filter(|n| matches!(n.tag_name().name(), "circle" | "polyline" | "line" | "path"))
            .count();
        assert!(marks > 5, "{id} draws nothing");
    }
    // Without unseen results there is no unseen plot.
    let mut plain = results.clone();
    for r in &mut plain {
        r.unseen = None;
    }
    assert_eq!(svgs(&page(&plain).1).len(), 3);
}

#[test]
fn unseen_configurations_appear_by_index_only() {
    let mut results = fixture::run(4, 1, 1.0, 5).tasks;
    // A harness that put an unseen shape into its report (it must not reach the page).
    for r in &mut results {
        if let Some(u) = &mut r.unseen {
            for c in u
                .optimized
                .performance
                .iter_mut()
                .chain(&mut u.original.performance)
            {
                c.extra
                    .insert("params".into(), serde_json::json!({"shape": [7777, 4242]}));
            }
        }
    }
    let (_, html) = page(&results);
    assert!(html.contains("unseen configurations (by index)"));
    assert!(html.contains("<td>u1</td>"));
    assert!(!html.contains("4242"), "a hidden shape reached the page");
    // Visible shapes are shown.
    assert!(html.contains("<code>[64,128]</code>"));
}

#[test]
fn reasons_digests_logs_and_escaping() {
    let mut results = fixture::run(7, 1, 1.0, 9).tasks;
    results[6].candidate.correctness.error = Some("<script>alert(1)</script> differs".into());
    let (_, html) = page(&results);
    assert!(html.contains("correctness: &lt;script&gt;alert(1)&lt;/script&gt; differs"));
    assert_eq!(
        html.matches("<script>").count(),
        1,
        "only the page's own script"
    );
    let p = results[0].provenance.as_ref().unwrap();
    for d in [
        &p.task,
        &p.harness,
        &p.image,
        p.agent.as_ref().unwrap(),
        &p.lockfile,
    ] {
        assert!(html.contains(d.as_str()), "{d}");
    }
    assert!(html
        .contains("href=\"tasks/triton2triton__fixture__task_0000/r0/logs/candidate.stderr.log\""));
    assert!(html.contains("data-ready"));
    // A kernel whose autotuning varied is named in its task's details, escaped.
    results[0].candidate.autotuning = Some(arena_eval::autotune::Autotuning {
        runs: Default::default(),
        varied: vec!["the original kernel chose 2 configurations of <k>".into()],
    });
    let (_, html) = page(&results);
    assert!(
        html.contains("<p>autotuning: the original kernel chose 2 configurations of &lt;k&gt;</p>")
    );
}

#[test]
fn a_large_run_stays_small_and_is_the_same_bytes_twice() {
    let results = fixture::run(400, 1, 1.0, 11).tasks;
    let (_, a) = page(&results);
    let (_, b) = page(&results);
    assert!(a.len() < 5 * 1024 * 1024, "{} bytes", a.len());
    assert_eq!(a, b);
}

/// Where the time went is on the page where the results carry timings, as the report sums it,
/// and absent where none does.
#[test]
fn the_time_tables_are_the_reports_sums() {
    let mut results = fixture::run(3, 1, 1.0, 7).tasks;
    let (_, html) = page(&results);
    assert!(!html.contains("Where the time went"));
    for r in &mut results {
        r.timings = Some(arena_run::result::Timings {
            total_s: 100.0,
            baseline_s: Some(40.0),
            candidate_s: Some(60.0),
            ..Default::default()
        });
    }
    let (report, html) = page(&results);
    assert_eq!(report.time.total_s, 300.0);
    let t = &html[html.find("<table id=\"time-phases\"").unwrap()..];
    let t = &t[..t.find("</table>").unwrap()];
    assert!(
        t.contains("<td>baseline</td>") && t.contains("data-value=\"120\""),
        "{t}"
    );
    assert!(
        !t.contains("<td>unseen</td>"),
        "phases that did not run are left out: {t}"
    );
    // No trusted performance gate, no table of its parts; with one, its parts.
    assert!(!html.contains("time-trusted-performance"));
    for r in &mut results {
        r.timings.as_mut().unwrap().breakdown = Some(arena_run::result::Breakdown {
            performance_parts_s: [("inputs".to_string(), 5.0)].into(),
            performance_measured_s: Some(0.5),
            ..Default::default()
        });
    }
    let (_, html) = page(&results);
    let t = &html[html.find("<table id=\"time-trusted-performance\"").unwrap()..];
    let t = &t[..t.find("</table>").unwrap()];
    assert!(
        t.contains("<td>inputs</td>") && t.contains("data-value=\"15\""),
        "{t}"
    );
    assert!(t.contains("<td>timed kernel work (in window)</td>"), "{t}");
}

/// A task run without a result is said beside the table, in markdown and on the page, with
/// the last line of its reason; never dropped in silence.
#[test]
fn task_runs_without_a_result_are_said_beside_the_table() {
    let results = fixture::run(3, 1, 1.0, 7).tasks;
    let (report, html) = page(&results);
    assert!(!html.contains("Without a result") && report.unscored_markdown().is_empty());
    let gone = arena_run::result::InfraError {
        task_id: "vllm/triton_rms_norm".into(),
        repeat: 1,
        reason: "traceback ...\nRuntimeError: CUDA out of memory <here>".into(),
        at: 0,
    };
    let report = report.with_unscored(vec![gone]);
    let md = report.markdown();
    assert!(
        md.contains("1 task run(s) without a result")
            && md.contains(
                "- `vllm/triton_rms_norm` (repeat 1): RuntimeError: CUDA out of memory <here>"
            ),
        "{md}"
    );
    let html = render(
        &report,
        &results,
        &PageInfo {
            title: "t".into(),
            run_id: None,
            link_base: String::new(),
        },
    );
    assert!(html.contains("<li><code>vllm/triton_rms_norm</code> (repeat 1): RuntimeError: CUDA out of memory &lt;here&gt;</li>"), "{html}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["unscored"][0]["repeat"], 1);
}

#[test]
fn cases_timed_in_cycles_show_their_cycles() {
    let mut results = fixture::run(1, 1, 1.0, 3).tasks;
    let cand = &mut results[0].candidate.performance;
    assert!(!cand.is_empty());
    for c in cand.iter_mut() {
        c.pairing.cycles = Some(11596);
        c.pairing.baseline_cycles = Some(22652);
    }
    let (_, html) = page(&results);
    assert!(html.contains("<th>original cycles</th><th>candidate cycles</th>"));
    assert!(html.contains("data-key=\"candidate_cycles\" data-value=\"11596\""));
    assert!(html.contains("data-key=\"original_cycles\" data-value=\"22652\""));
    // Other cases keep milliseconds.
    let (_, plain) = page(&fixture::run(1, 1, 1.0, 3).tasks);
    assert!(plain.contains("<th>original ms</th>") && !plain.contains("cycles</th>"));
}
