//! One kernel on configurations that each need a harness of their own (a `get_inputs()`
//! declaration describes one configuration per rewritten file): one evaluator container, one
//! tree, the kernel compiled once, then each configuration's correctness and performance with
//! its rewritten files laid over the tree (`/arena/views/<k>/<rel>`). Before, each
//! configuration was an evaluator container of its own, which paid the container, the
//! compile and a cold compiler cache every time: 12 configurations of an AgentKernelArena vLLM
//! task took 9 minutes on an H100, longer than a device call.

use super::{GatesJob, Overlay, Step, REPORTS, VIEWS};
use crate::gate::Gate;

/// The step name and report directory of configuration `k`'s gate `g`.
pub fn config_step(k: usize, g: Gate) -> String {
    format!("u{k}.{}", g.name())
}

/// Where configuration `k`'s reports and performance output are copied, below the out
/// directory (the compile report stays in [`REPORTS`]).
pub fn config_reports(k: usize) -> String {
    format!("u{k}")
}

impl GatesJob {
    /// A [`GatesJob::gates`] job made one that compiles once, then runs each of `configs`
    /// configurations' correctness and performance (its own steps, renamed; the next
    /// configuration goes on whatever this one did), the files `rels` (relative to the task)
    /// taken from `VIEWS/<k>/<rel>` before each of its steps.
    pub fn per_config(mut job: GatesJob, configs: usize, rels: &[String]) -> GatesJob {
        let gates = [Gate::Correctness, Gate::Performance];
        let templates: Vec<Step> = job.steps.drain(1..).collect();
        debug_assert_eq!(job.steps[0].reports.as_deref(), Some(REPORTS));
        debug_assert!(templates
            .iter()
            .map(|s| s.name.as_str())
            .eq(gates.map(|g| g.name())));
        for k in 0..configs {
            let overlay: Vec<Overlay> = rels
                .iter()
                .map(|rel| {
                    let rel = rel.trim_start_matches("./").to_string();
                    Overlay {
                        from: format!("{VIEWS}/{k}/{rel}"),
                        rel,
                    }
                })
                .collect();
            for (g, template) in gates.into_iter().zip(&templates) {
                let mut s = template.clone();
                s.name = config_step(k, g);
                s.reports = Some(config_reports(k));
                if s.capture.is_some() {
                    s.capture = Some(format!("{}/{}", config_reports(k), crate::aka_perf::OUTPUT));
                }
                s.overlay = overlay.clone();
                s.go_on = true;
                job.steps.push(s);
            }
        }
        job.deadline_s = job.steps.iter().map(|s| s.timeout).sum::<u64>() + 30;
        job
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeouts::GateTimeouts;
    use crate::trusted::BASELINE;
    use arena_task::TaskConfig;

    #[test]
    fn compiles_once_and_lays_each_configuration_over_its_steps() {
        let text = "task_type: triton2triton\nsource_file_path: [k.py]\n\
             compile_command: [c]\ncorrectness_command: [t]\nperformance_command: [p]\n";
        let cfg = TaskConfig::parse(std::path::Path::new("config.yaml"), text).unwrap();
        let t = GateTimeouts::default();
        let rels = vec!["./scripts/run.py".to_string()];
        let gates = GatesJob::gates(&cfg, &t, &[], vec![], BASELINE, 10);
        let j = GatesJob::per_config(gates, 2, &rels);
        let names: Vec<&str> = j.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "compile",
                "u0.correctness",
                "u0.performance",
                "u1.correctness",
                "u1.performance"
            ]
        );
        assert!(j.steps[0].overlay.is_empty() && !j.steps[0].go_on);
        let s = &j.steps[3];
        assert_eq!(s.overlay[0].rel, "scripts/run.py");
        assert_eq!(s.overlay[0].from, "/arena/views/1/scripts/run.py");
        assert_eq!(s.reports.as_deref(), Some("u1"));
        assert!(s.go_on && s.tree.is_some());
        assert_eq!(j.steps[4].capture.as_deref(), Some("u1/output"));
        assert_eq!(j.trees.len(), 1);
        let sum: u64 = j.steps.iter().map(|s| s.timeout).sum();
        assert_eq!(j.deadline_s, sum + 30);
    }
}
