//! `arenactl report` and `arenactl compare` on synthetic run directories, and the HTML report
//! opened in a real headless browser (Debian's chromium, installed by ci/setup.sh): it renders
//! without a console message, its script runs and sorts, and its plots are there.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn arenactl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_arenactl"))
        .args(args)
        .output()
        .expect("run arenactl")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn write_run(dir: &Path, tasks: usize, factor: f64, seed: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let set = arena_report::fixture::run(tasks, 2, factor, seed);
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_vec_pretty(&set).unwrap(),
    )
    .unwrap();
}

#[test]
fn every_format_says_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    write_run(&run, 9, 1.0, 4);
    let r = run.to_str().unwrap();
    // HTML by default, into the run directory, its path printed.
    let printed = ok(&arenactl(&["report", r]));
    assert_eq!(printed.trim(), run.join("report.html").to_str().unwrap());
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let json: Value =
        serde_json::from_str(&ok(&arenactl(&["report", r, "--format", "json"]))).unwrap();
    let all = json["aggregates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["task_type"] == "all")
        .unwrap();
    let score = all["mean_score"].as_f64().unwrap();
    assert!(html.contains(&format!("data-key=\"mean_score\" data-value=\"{score}\"")));
    let md = ok(&arenactl(&["report", r, "--format", "md"]));
    assert!(md.contains(&format!("| {score:.1} |")), "{md}");
    let csv = ok(&arenactl(&[
        "report",
        r,
        "--format",
        "csv",
        "--out",
        tmp.path().join("a.csv").to_str().unwrap(),
    ]));
    assert!(csv.is_empty());
    let csv = std::fs::read_to_string(tmp.path().join("a.csv")).unwrap();
    assert!(
        csv.lines()
            .any(|l| l.starts_with("all,") && l.contains(&format!(",{score},"))),
        "{csv}"
    );
    // A results.json file works as well as its directory.
    let o = ok(&arenactl(&[
        "report",
        run.join("results.json").to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(serde_json::from_str::<Value>(&o).unwrap(), json);
    // Bad input is refused with the file named, the cause printed once.
    let missing = tmp.path().join("nothing");
    let o = arenactl(&["report", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "error: {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    std::fs::write(
        &missing,
        "{\"schema\": \"arena.results/v9\", \"tasks\": []}",
    )
    .unwrap();
    let o = arenactl(&["report", missing.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(err.matches("arena.results/v9").count(), 1, "{err}");
}

#[test]
fn compare_finds_a_known_difference_and_none_between_equals() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    write_run(&a, 30, 1.0, 1);
    write_run(&b, 30, 1.4, 2);
    write_run(&c, 30, 1.0, 3);
    let p = |d: &Path| d.to_str().unwrap().to_string();
    let faster: Value =
        serde_json::from_str(&ok(&arenactl(&["compare", &p(&a), &p(&b), "--json"]))).unwrap();
    assert!(
        faster["wilcoxon"]["p_value"].as_f64().unwrap() < 0.001,
        "{faster}"
    );
    assert!((faster["geomean_ratio"].as_f64().unwrap() - 1.4).abs() < 0.05);
    assert!(faster["verdict"]
        .as_str()
        .unwrap()
        .contains("is faster than"));
    let same = ok(&arenactl(&["compare", &p(&a), &p(&c)]));
    assert!(
        same.trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("no significant difference"),
        "{same}"
    );
    let page = tmp.path().join("cmp.html");
    ok(&arenactl(&[
        "compare",
        &p(&a),
        &p(&b),
        "--format",
        "html",
        "--out",
        &p(&page),
    ]));
    assert!(std::fs::read_to_string(&page)
        .unwrap()
        .contains("id=\"verdict\""));
}

/// The page as chromium renders it (`--dump-dom`, after its script ran), and what chromium
/// logged from the page's console.
fn render(page: &Path, fragment: &str) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}{fragment}", page.display()))
        .output()
        .expect("chromium (Debian package `chromium`; ci/setup.sh installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let console = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE"))
        .map(str::to_string)
        .collect();
    (String::from_utf8(o.stdout).unwrap(), console)
}

#[test]
fn the_page_renders_in_a_real_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    write_run(&run, 24, 1.0, 8);
    ok(&arenactl(&["report", run.to_str().unwrap()]));
    let page = run.join("report.html");
    let (dom, console) = render(&page, "");
    assert!(console.is_empty(), "console: {console:?}");
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page's script did not run"
    );
    assert_eq!(dom.matches("<svg").count(), 4);
    for id in ["plot-speedup", "plot-fastp", "plot-unseen", "plot-scores"] {
        assert!(dom.contains(&format!("<figure id=\"{id}\">")), "{id}");
    }
    // Sorted by speedup (column 6), descending: the rows come out in that order.
    let (dom, console) = render(&page, "#sort=6-desc");
    assert!(console.is_empty(), "console: {console:?}");
    let body = &dom[dom.find("<table id=\"tasks\"").unwrap()..];
    let speeds: Vec<f64> = body
        .match_indices("data-key=\"speedup\" data-value=\"")
        .map(|(i, m)| {
            let rest = &body[i + m.len()..];
            rest[..rest.find('"').unwrap()].parse().unwrap()
        })
        .collect();
    assert_eq!(speeds.len(), 48);
    assert!(speeds.windows(2).all(|w| w[0] >= w[1]), "{speeds:?}");
    assert!(speeds.first() > speeds.last());
}

#[test]
fn no_results_is_a_warning_and_exit_1_never_a_table_of_zeros() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("empty");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("results.json"), "{\"tasks\": []}").unwrap();
    let file = run.join("results.json");
    let (r, f) = (run.to_str().unwrap(), file.to_str().unwrap());
    for args in [
        &["score", f][..],
        &["score", f, "--json"][..],
        &["report", r, "--format", "md"][..],
        &["report", r][..],
    ] {
        let o = arenactl(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!("warning: {f}: no task results to score")),
            "{args:?}: {err}"
        );
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("-0.0"),
            "{args:?}"
        );
    }
    let o = arenactl(&["compare", r, r]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no task results to compare"));
}

#[test]
fn report_json_is_format_json_and_o_is_out() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    write_run(&run, 3, 1.5, 7);
    let r = run.to_str().unwrap();
    let by_format = ok(&arenactl(&["report", r, "--format", "json"]));
    let by_flag = ok(&arenactl(&["report", r, "--json"]));
    assert_eq!(by_format, by_flag);
    let out = tmp.path().join("r.json");
    ok(&arenactl(&[
        "report",
        r,
        "--json",
        "-o",
        out.to_str().unwrap(),
    ]));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), by_flag);
    // One or the other: both is a usage error.
    let o = arenactl(&["report", r, "--json", "--format", "md"]);
    assert_eq!(o.status.code(), Some(2));
}
