//! The job of a self-reported evaluation: the task's own commands, run by arena's gate
//! runner (`gates.py`) as the harness user, step by step, each under its gate's timeout, the
//! harness's reports copied where only the runner writes. The main gates stop at the first
//! failure; a probe (which unseen configurations a kernel fails) compiles once and runs the
//! correctness commands once per configuration, each from a view of the task in which that
//! configuration's harness file stands in for the image's.

use std::collections::BTreeMap;

use arena_task::TaskConfig;
use serde::Serialize;

use crate::gate::{Gate, GATES};
use crate::layout::{OUT_DIR, TASK_ROOT};
use crate::timeouts::{commands, GateTimeouts};
use crate::trusted::Ids;

/// The harness's user in a self-reported evaluation.
pub const HARNESS_UID: u32 = 60003;
/// Its scratch (HOME, TMPDIR, caches).
pub const HARNESS_SCRATCH: &str = "/scratch/harness";
/// `VIEWS/<k>/`: the task as configuration `k` sees it (links into /task, its own harness).
pub const VIEWS: &str = "/arena/views";
/// Where the harness writes its reports (a sized file system of its own).
pub fn build_dir() -> String {
    format!("{TASK_ROOT}/build")
}
/// Where a gate step's reports are copied, below the out directory.
pub const REPORTS: &str = "reports";

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Step {
    pub name: String,
    pub commands: Vec<String>,
    pub timeout: u64,
    pub cwd: String,
    /// Copy the harness's reports after this step, into `out/<reports>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reports: Option<String>,
    /// Go on with the next step when this one fails.
    pub go_on: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct GatesJob {
    pub user: Ids,
    pub groups: Vec<u32>,
    pub env: BTreeMap<String, String>,
    pub out: String,
    pub build: String,
    /// The harness's output goes nowhere (it may hold hidden configurations).
    pub quiet: bool,
    pub steps: Vec<Step>,
    /// Seconds after which the gate runner stops everything and ends, whoever is watching.
    pub deadline_s: u64,
}

impl GatesJob {
    fn new(image_env: &[String], groups: Vec<u32>, steps: Vec<Step>) -> GatesJob {
        let mut env: BTreeMap<String, String> = image_env
            .iter()
            .filter_map(|e| e.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.insert("HOME".into(), HARNESS_SCRATCH.into());
        env.insert("TMPDIR".into(), HARNESS_SCRATCH.into());
        env.entry("PATH".into())
            .or_insert_with(|| "/usr/local/bin:/usr/bin:/bin".into());
        GatesJob {
            user: Ids {
                uid: HARNESS_UID,
                gid: HARNESS_UID,
            },
            groups,
            env,
            out: OUT_DIR.into(),
            build: build_dir(),
            quiet: false,
            deadline_s: steps.iter().map(|s: &Step| s.timeout).sum::<u64>() + 30,
            steps,
        }
    }

    /// compile → correctness → performance from `cwd`, stopping at the first failure.
    pub fn gates(
        cfg: &TaskConfig,
        t: &GateTimeouts,
        cwd: &str,
        image_env: &[String],
        groups: Vec<u32>,
    ) -> GatesJob {
        let steps = GATES
            .iter()
            .map(|g| Step {
                name: g.name().into(),
                commands: commands(cfg, *g).to_vec(),
                timeout: t.get(*g),
                cwd: cwd.into(),
                reports: Some(REPORTS.into()),
                go_on: false,
            })
            .collect();
        GatesJob::new(image_env, groups, steps)
    }

    /// Compile once from /task, then correctness once per configuration from its view
    /// (`probe<k>` steps, each judged on its own).
    pub fn probe(
        cfg: &TaskConfig,
        t: &GateTimeouts,
        configs: usize,
        image_env: &[String],
        groups: Vec<u32>,
    ) -> GatesJob {
        let mut steps = vec![Step {
            name: Gate::Compile.name().into(),
            commands: commands(cfg, Gate::Compile).to_vec(),
            timeout: t.compile,
            cwd: TASK_ROOT.into(),
            reports: None,
            go_on: false,
        }];
        for k in 0..configs {
            steps.push(Step {
                name: format!("probe{k}"),
                commands: commands(cfg, Gate::Correctness).to_vec(),
                timeout: t.correctness,
                cwd: format!("{VIEWS}/{k}"),
                reports: None,
                go_on: true,
            });
        }
        GatesJob::new(image_env, groups, steps)
    }

    /// What the whole container may take.
    pub fn limit_s(&self) -> u64 {
        self.steps.iter().map(|s| s.timeout).sum::<u64>() + 60
    }
}

/// What a probe found: `None` where the kernel did not compile (or the container never got
/// that far), else whether each configuration passed (a configuration never reached failed).
pub fn read_probe(out_dir: &std::path::Path, configs: usize) -> Option<Vec<bool>> {
    let text = crate::untrusted::read_text_beneath(
        out_dir,
        std::path::Path::new(crate::layout::GATES_FILE),
        64 << 10,
    )
    .unwrap_or_default();
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

    fn cfg() -> TaskConfig {
        let text = "task_type: triton2triton\nsource_file_path: [k.py]\n\
             compile_command: [\"python3 run.py compile\"]\n\
             correctness_command: [\"python3 run.py correctness\", \"echo 'ok'\"]\n\
             performance_command: [\"python3 run.py performance\"]\n";
        TaskConfig::parse(std::path::Path::new("config.yaml"), text).unwrap()
    }

    #[test]
    fn the_gates_in_order_as_the_harness_user_with_its_own_home() {
        let j = GatesJob::gates(
            &cfg(),
            &GateTimeouts::default(),
            "/task",
            &["PATH=/x".into(), "HOME=/root".into()],
            vec![],
        );
        let names: Vec<&str> = j.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["compile", "correctness", "performance"]);
        assert_eq!(
            j.steps[1].commands,
            ["python3 run.py correctness", "echo 'ok'"]
        );
        assert!(j.steps.iter().all(|s| !s.go_on && s.reports.is_some()));
        assert_eq!(j.user.uid, HARNESS_UID);
        assert_eq!(j.env["HOME"], HARNESS_SCRATCH);
        assert_eq!(j.env["PATH"], "/x");
        assert_eq!(j.limit_s(), 600 + 900 + 1800 + 60);
    }

    #[test]
    fn a_probe_compiles_once_and_judges_each_configuration_from_its_view() {
        let j = GatesJob::probe(&cfg(), &GateTimeouts::default(), 3, &[], vec![]);
        assert_eq!(j.steps.len(), 4);
        assert_eq!(j.steps[0].cwd, "/task");
        assert_eq!(j.steps[2].name, "probe1");
        assert_eq!(j.steps[2].cwd, "/arena/views/1");
        assert!(j.steps[1..].iter().all(|s| s.go_on));
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("gates"), "compile 0\nprobe0 0\nprobe1 1\n").unwrap();
        assert_eq!(read_probe(d.path(), 3), Some(vec![true, false, false]));
        std::fs::write(d.path().join("gates"), "compile 1\n").unwrap();
        assert_eq!(read_probe(d.path(), 3), None);
    }
}
