//! The per-configuration probe: which of a task's unseen configurations a kernel fails. When
//! a kernel fails the correctness gate on the whole unseen set, one more evaluator container
//! compiles it once and runs the correctness commands once per configuration, with a harness
//! copy holding only that configuration put in place before each run. Its exit codes become
//! the per-category failure counts of the report.

use arena_task::TaskConfig;

use crate::gate::Gate;
use crate::layout::{GATES_FILE, OUT_DIR};
use crate::script::{commands, preamble, sh_quote, GateTimeouts};

/// Read-only: `PROBE_DIR/<k>/<file>` is the rewritten `<file>` of configuration `k`.
pub const PROBE_DIR: &str = "/arena/probe";

/// Exit code recorded when a configuration's harness copy could not be put in place.
pub const PLACE_FAILED: i32 = 98;

/// The probe script for `configs` configurations whose variants rewrite `files` (paths
/// relative to the task directory).
pub fn probe_script(
    cfg: &TaskConfig,
    timeouts: &GateTimeouts,
    files: &[String],
    configs: usize,
) -> String {
    let gates = format!("{OUT_DIR}/{GATES_FILE}");
    let mut s = preamble("probe: compile once, then correctness per configuration");
    for cmd in commands(cfg, Gate::Compile) {
        s.push_str(&format!(
            "run {} {} || {{ rc=$?; echo \"compile $rc\" >> {gates}; exit 0; }}\n",
            timeouts.compile,
            sh_quote(cmd)
        ));
    }
    s.push_str(&format!("echo \"compile 0\" >> {gates}\n"));
    let correctness: Vec<String> = commands(cfg, Gate::Correctness)
        .iter()
        .map(|c| format!("run {} {}", timeouts.correctness, sh_quote(c)))
        .collect();
    for k in 0..configs {
        s.push_str(&format!("echo \"== arena probe: configuration {k}\" >&2\n"));
        let place: Vec<String> = files
            .iter()
            .map(|f| {
                let rel = f.trim_start_matches("./");
                format!(
                    "cat {} > {}",
                    sh_quote(&format!("{PROBE_DIR}/{k}/{rel}")),
                    sh_quote(rel)
                )
            })
            .collect();
        s.push_str(&format!(
            "if {{ {}; }}; then rc=0; {{ {}; }} || rc=$?; else rc={PLACE_FAILED}; fi\n",
            if place.is_empty() {
                "true".to_string()
            } else {
                place.join(" && ")
            },
            if correctness.is_empty() {
                "true".to_string()
            } else {
                correctness.join(" && ")
            },
        ));
        s.push_str(&format!("echo \"probe{k} $rc\" >> {gates}\n"));
    }
    s
}

/// What a probe found: `None` where the kernel did not compile (or the container never got
/// that far), else whether each configuration passed (a configuration the container never
/// reached counts as failed).
pub fn read_probe(out_dir: &std::path::Path, configs: usize) -> Option<Vec<bool>> {
    let text = std::fs::read_to_string(out_dir.join(GATES_FILE)).unwrap_or_default();
    let mut compiled = false;
    let mut passed = vec![false; configs];
    for line in text.lines() {
        let Some((name, code)) = line.split_once(' ') else {
            continue;
        };
        let Ok(code) = code.trim().parse::<i32>() else {
            continue;
        };
        if name == "compile" {
            compiled = code == 0;
        } else if let Some(k) = name
            .strip_prefix("probe")
            .and_then(|k| k.parse::<usize>().ok())
        {
            if k < configs {
                passed[k] = code == 0;
            }
        }
    }
    compiled.then_some(passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The script under sh, with stand-in commands: a "harness" that fails on configuration 1.
    #[test]
    fn probe_runs_each_configuration_with_its_own_harness_copy() {
        let dir = tempfile::tempdir().unwrap();
        let text = "task_type: triton2triton\nsource_file_path: [k.py]\n\
                    compile_command: [\"true\"]\n\
                    correctness_command: [\"grep -q good scripts/h.txt\"]\n\
                    performance_command: [\"touch perf_ran\"]\n";
        let cfg = TaskConfig::parse(std::path::Path::new("config.yaml"), text).unwrap();
        let (out, task, probe) = (
            dir.path().join("out"),
            dir.path().join("task"),
            dir.path().join("probe"),
        );
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(task.join("scripts")).unwrap();
        std::fs::write(task.join("scripts/h.txt"), "visible").unwrap();
        for (k, body) in ["good", "bad", "good"].iter().enumerate() {
            std::fs::create_dir_all(probe.join(format!("{k}/scripts"))).unwrap();
            std::fs::write(probe.join(format!("{k}/scripts/h.txt")), body).unwrap();
        }
        let script = probe_script(&cfg, &GateTimeouts::default(), &["scripts/h.txt".into()], 4)
            .replace(PROBE_DIR, probe.to_str().unwrap());
        crate::script::run_under_sh(&script, &out, &task);
        let gates = std::fs::read_to_string(out.join(GATES_FILE)).unwrap();
        // Configuration 3 has no copy: it is recorded as not placed, and fails.
        assert_eq!(
            gates,
            format!("compile 0\nprobe0 0\nprobe1 1\nprobe2 0\nprobe3 {PLACE_FAILED}\n")
        );
        assert_eq!(read_probe(&out, 4), Some(vec![true, false, true, false]));
        assert!(!task.join("perf_ran").exists());
    }

    #[test]
    fn a_probe_that_did_not_compile_or_stopped_early() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(GATES_FILE), "compile 1\n").unwrap();
        assert_eq!(read_probe(dir.path(), 2), None);
        std::fs::write(dir.path().join(GATES_FILE), "compile 0\nprobe0 0\n").unwrap();
        assert_eq!(read_probe(dir.path(), 2), Some(vec![true, false]));
    }
}
