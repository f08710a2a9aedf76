//! From what an evaluator container left behind — the gate script's exit codes and the
//! harness's reports — to an [`Evaluation`]. A gate passes only if its commands exited 0 and
//! its report (where the harness wrote one) says `ok`; a gate after a failed one is `skipped`;
//! a gate the container never reached (killed, timed out) fails with the reason. Performance
//! cases are read as AgentKernelArena reads them ([`crate::aka_perf`]); a performance command
//! that exits non-zero, or leaves no case, fails its gate with the reason.

use std::collections::BTreeMap;
use std::path::Path;

use crate::aka_perf::{read_run, Side, Writer};
use crate::record::{Evaluation, GateReport, GateStatus};

use crate::gate::Gate;
use crate::layout::GATES_FILE;
use crate::untrusted::{read_text_beneath, Refusal};

/// The most a report may hold (a container wrote it).
pub const REPORT_CAP: u64 = 4 << 20;

/// Exit codes of `timeout -s KILL` and of a process killed by SIGKILL.
const KILLED: [i32; 2] = [124, 137];

/// How one evaluation is read: which kernel the reports are of, and the task's type (AKA
/// reads torch2hip reports by kernel).
#[derive(Debug, Clone, Copy)]
pub struct Reading<'a> {
    pub task_type: &'a str,
    pub side: Side,
    pub writer: Writer,
}

impl Default for Reading<'_> {
    fn default() -> Self {
        Reading {
            task_type: "",
            side: Side::Candidate,
            writer: Writer::Harness,
        }
    }
}

/// Reads `out_dir/gates` and the reports copied to `reports` (the compile and correctness
/// reports, and the performance run as [`crate::aka_perf::read_run`] finds it).
/// `container_note` explains a container that did not finish (e.g. "timed out after 960 s"),
/// for the gates it never reached.
pub fn collect(
    out_dir: &Path,
    reports: &Path,
    container_note: Option<&str>,
    how: Reading,
) -> Evaluation {
    collect_codes(&read_codes(out_dir), reports, container_note, how)
}

/// [`collect`] from exit codes already read (by gate name), e.g. one configuration's of a
/// job that ran several.
pub fn collect_codes(
    codes: &BTreeMap<String, i32>,
    reports: &Path,
    container_note: Option<&str>,
    how: Reading,
) -> Evaluation {
    let mut e = gates(codes, reports, container_note);
    if e.correct() {
        performance(
            &mut e,
            codes.get(Gate::Performance.name()).copied(),
            reports,
            container_note,
            how,
        );
    }
    e
}

/// The compile and correctness gates alone (a paired evaluation reads its performance runs
/// itself: [`crate::paired`]).
pub fn gates(
    codes: &BTreeMap<String, i32>,
    reports: &Path,
    container_note: Option<&str>,
) -> Evaluation {
    let mut judged: BTreeMap<Gate, GateReport> = BTreeMap::new();
    let mut failed = false;
    for g in [Gate::Compile, Gate::Correctness] {
        let report = if failed {
            GateReport::new(GateStatus::Skipped, None)
        } else {
            judge(g, codes.get(g.name()).copied(), reports, container_note)
        };
        failed |= report.status != GateStatus::Ok;
        judged.insert(g, report);
    }
    if let Some(code) = codes.get("setup") {
        let r = GateReport::new(
            GateStatus::Fail,
            Some(format!(
                "evaluator could not enter the task directory (exit {code})"
            )),
        );
        judged.insert(Gate::Compile, r);
    }
    Evaluation::new(
        judged.remove(&Gate::Compile).unwrap(),
        judged.remove(&Gate::Correctness).unwrap(),
        Vec::new(),
    )
}

fn performance(
    e: &mut Evaluation,
    code: Option<i32>,
    reports: &Path,
    note: Option<&str>,
    how: Reading,
) {
    let Some(code) = code else {
        let why = note.unwrap_or("the evaluator stopped before this gate finished");
        e.performance_error = Some(format!("performance gate: {why}"));
        return;
    };
    match read_run(reports, how.task_type, how.side, how.writer) {
        Ok(run) => {
            e.performance = run.cases;
            e.performance_source = Some(run.source);
        }
        Err(why) if code == 0 => e.performance_error = Some(why),
        Err(_) => {}
    }
    if code != 0 {
        let mut why = if KILLED.contains(&code) {
            format!("performance gate killed after its timeout (exit {code})")
        } else {
            format!("performance gate exited {code}")
        };
        if let Some(err) = e.performance.iter().find_map(|c| c.error.as_deref()) {
            why = format!("{why}: {err}");
        }
        e.performance_error = Some(why);
    }
}

/// What the gate runner's own exit codes for a step mean (the harness's are its own).
pub fn runner_code(code: i32) -> Option<&'static str> {
    match code {
        97 => Some("a report of an earlier step could not be removed"),
        98 => Some("processes of the kernel's user survived being killed"),
        99 => Some("the kernel left files or IPC objects its clean-up could not remove"),
        _ => None,
    }
}

/// The exit code of each step the gate runner reached, by step name.
pub fn read_codes(out_dir: &Path) -> BTreeMap<String, i32> {
    let text = read_text_beneath(out_dir, Path::new(GATES_FILE), 64 << 10).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (g, c) = l.split_once(' ')?;
            Some((g.to_string(), c.trim().parse().ok()?))
        })
        .collect()
}

fn judge(g: Gate, code: Option<i32>, build: &Path, note: Option<&str>) -> GateReport {
    let Some(code) = code else {
        let why = note.unwrap_or("the evaluator stopped before this gate finished");
        return GateReport::new(GateStatus::Fail, Some(format!("{} gate: {why}", g.name())));
    };
    let report = read_report(g, build);
    if code != 0 {
        let why = if KILLED.contains(&code) {
            format!("{} gate killed after its timeout (exit {code})", g.name())
        } else if let Some(why) = runner_code(code) {
            format!("{} gate: {why}", g.name())
        } else {
            format!("{} gate exited {code}", g.name())
        };
        let error = match report.as_ref().and_then(|r| r.error.clone()) {
            Some(e) => format!("{why}: {e}"),
            None => why,
        };
        let mut r = report.unwrap_or_else(|| GateReport::new(GateStatus::Fail, None));
        r.status = GateStatus::Fail;
        r.error = Some(error);
        return r;
    }
    match report {
        Some(r) if r.status == GateStatus::Ok => r,
        Some(mut r) => {
            r.status = GateStatus::Fail;
            r.error.get_or_insert_with(|| {
                format!("{} exited 0 but its report does not say ok", g.name())
            });
            r
        }
        // Harnesses outside the task_runner convention may not write reports; the exit code
        // is then the verdict.
        None => GateReport::new(GateStatus::Ok, None),
    }
}

fn read_report(g: Gate, build: &Path) -> Option<GateReport> {
    let text = match read_text_beneath(build, Path::new(g.report_file()), REPORT_CAP) {
        Ok(t) => t,
        Err(Refusal::Missing) => return None,
        Err(why) => {
            return Some(GateReport::new(
                GateStatus::Fail,
                Some(format!("build/{}: refused: {why}", g.report_file())),
            ))
        }
    };
    match serde_json::from_str::<GateReport>(&text) {
        Ok(r) => Some(r),
        Err(e) => Some(GateReport::new(
            GateStatus::Fail,
            Some(format!("build/{}: unreadable report: {e}", g.report_file())),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let build = d.path().join("build");
        fs::create_dir_all(&out).unwrap();
        fs::create_dir_all(&build).unwrap();
        (d, out, build)
    }

    #[test]
    fn all_gates_pass_with_reports() {
        let (_d, out, build) = dirs();
        fs::write(
            out.join("gates"),
            "compile 0\ncorrectness 0\nperformance 0\n",
        )
        .unwrap();
        fs::write(
            build.join("compile_report.json"),
            r#"{"status":"ok","error":null}"#,
        )
        .unwrap();
        fs::write(
            build.join("correctness_report.json"),
            r#"{"status":"ok","error":null,"num_shapes":3}"#,
        )
        .unwrap();
        fs::write(
            build.join("performance_report.json"),
            r#"[{"test_case_id":"perf1","execution_time_ms":0.5}]"#,
        )
        .unwrap();
        let e = collect(&out, &build, None, Reading::default());
        assert!(e.correct());
        assert_eq!(e.correctness.extra["num_shapes"], 3);
        assert_eq!(e.performance.len(), 1);
        assert_eq!(e.performance[0].execution_time_ms, 0.5);
    }

    #[test]
    fn failed_correctness_skips_performance_and_keeps_the_error() {
        let (_d, out, build) = dirs();
        fs::write(out.join("gates"), "compile 0\ncorrectness 1\n").unwrap();
        fs::write(
            build.join("correctness_report.json"),
            r#"{"status":"fail","error":"shape (4,): element 2 is 7"}"#,
        )
        .unwrap();
        // A stale performance report must not be read when the gate did not run.
        fs::write(
            build.join("performance_report.json"),
            r#"[{"test_case_id":"perf1","execution_time_ms":0.1}]"#,
        )
        .unwrap();
        let e = collect(&out, &build, None, Reading::default());
        assert!(e.compiled() && !e.correct());
        let err = e.correctness.error.unwrap();
        assert!(
            err.contains("exited 1") && err.contains("element 2 is 7"),
            "{err}"
        );
        assert!(e.performance.is_empty());
    }

    #[test]
    fn exit_zero_with_a_failing_report_fails() {
        let (_d, out, build) = dirs();
        fs::write(out.join("gates"), "compile 0\n").unwrap();
        fs::write(
            build.join("compile_report.json"),
            r#"{"status":"fail","error":null}"#,
        )
        .unwrap();
        let e = collect(&out, &build, None, Reading::default());
        assert_eq!(e.compile.status, GateStatus::Fail);
        assert_eq!(e.correctness.status, GateStatus::Skipped);
    }

    #[test]
    fn gates_never_reached_fail_with_the_container_note() {
        let (_d, out, build) = dirs();
        fs::write(out.join("gates"), "compile 0\n").unwrap();
        let e = collect(
            &out,
            &build,
            Some("timed out after 60 s"),
            Reading::default(),
        );
        assert!(e.compiled());
        let err = e.correctness.error.unwrap();
        assert!(err.contains("timed out after 60 s"), "{err}");
    }

    #[test]
    fn a_report_that_is_a_link_or_a_fifo_fails_its_gate_and_is_never_followed() {
        let (_d, out, build) = dirs();
        fs::write(
            out.join("gates"),
            "compile 0\ncorrectness 0\nperformance 0\n",
        )
        .unwrap();
        // A host file the container points at: its content must not reach the result.
        let host = _d.path().join("host.json");
        fs::write(&host, r#"{"status":"ok","error":null,"secret":"host"}"#).unwrap();
        std::os::unix::fs::symlink(&host, build.join("compile_report.json")).unwrap();
        nix::unistd::mkfifo(
            &build.join("correctness_report.json"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        let e = collect(&out, &build, None, Reading::default());
        assert!(!e.compiled());
        let err = e.compile.error.clone().unwrap();
        assert!(
            err.contains("refused") && err.contains("symbolic link"),
            "{err}"
        );
        assert!(!serde_json::to_string(&e).unwrap().contains("secret"));
    }

    #[test]
    fn a_fifo_report_does_not_hang_the_collection() {
        let (_d, out, build) = dirs();
        fs::write(out.join("gates"), "compile 0\n").unwrap();
        nix::unistd::mkfifo(
            &build.join("compile_report.json"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        let e = collect(&out, &build, None, Reading::default());
        assert!(e.compile.error.unwrap().contains("not a regular file"));
    }

    #[test]
    fn killed_gate_is_named_as_a_timeout() {
        let (_d, out, build) = dirs();
        fs::write(out.join("gates"), "compile 137\n").unwrap();
        let e = collect(&out, &build, None, Reading::default());
        assert!(e
            .compile
            .error
            .unwrap()
            .contains("killed after its timeout"));
    }
}
