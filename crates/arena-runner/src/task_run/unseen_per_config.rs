//! One kernel on unseen configurations that each need a rewritten harness of their own
//! (`get_inputs()` declarations): one evaluator container in which the gate runner compiles
//! the kernel once and runs each configuration's correctness and performance in the same
//! tree, that configuration's files laid over it first (arena_eval's `GatesJob::per_config`).
//! Each configuration is judged on its own, as if it had been an evaluation of its own.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use arena_eval::collect::{collect_codes, read_codes, REPORT_CAP};
use arena_eval::record::Evaluation;
use arena_eval::self_reported::{config_reports, config_step, REPORTS, VIEWS};
use arena_eval::sources::StagedSource;
use arena_eval::untrusted::read_beneath;
use arena_eval::{Gate, GatesJob};
use arena_proto::v1::EventKind;

use super::phase::{ContainerPhase, UnseenStep};
use super::self_reported::SelfReportedRun;
use super::{bind, TaskRun};
use crate::error::{Result, RunnerError};

impl TaskRun<'_> {
    /// The original (no `sources`) or the agent's kernel on `configs` configurations whose
    /// files `rels` (relative to the task) are written under `views/<k>/`: one evaluation per
    /// configuration, in order.
    pub(crate) async fn evaluate_per_config(
        &self,
        phase: ContainerPhase,
        sources: &[StagedSource],
        views: &Path,
        configs: usize,
        rels: &[String],
    ) -> Result<Vec<Evaluation>> {
        let (gates, how) = self.kernel_job(sources)?;
        let mut job = GatesJob::per_config(gates, configs, rels);
        job.quiet = true;
        // Only the gate runner (root) lays them over: a kernel running configuration k can
        // read its own harness in its tree, not the others' here.
        std::fs::set_permissions(views, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| RunnerError::io(views, e))?;
        let r = self
            .self_reported(SelfReportedRun {
                phase,
                job,
                sources,
                sources_apart: false,
                extra_binds: &[bind(views, VIEWS, true)],
            })
            .await?;
        let note = r.timeout_note.as_deref();
        let codes = read_codes(&r.out);
        // The compile report, once, beside each configuration's own reports.
        let compile_report = Path::new(REPORTS).join("compile_report.json");
        let compile_report = read_beneath(&r.out, &compile_report, REPORT_CAP).ok();
        let mut evaluations = Vec::with_capacity(configs);
        for k in 0..configs {
            let dir = r.out.join(config_reports(k));
            std::fs::create_dir_all(&dir).map_err(|e| RunnerError::io(&dir, e))?;
            if let Some(bytes) = &compile_report {
                let to = dir.join("compile_report.json");
                std::fs::write(&to, bytes).map_err(|e| RunnerError::io(&to, e))?;
            }
            let evaluation = collect_codes(&config_codes(&codes, k), &dir, note, how);
            self.gate_events(
                phase.step(UnseenStep::Config(k)),
                &evaluation,
                EventKind::EvaluatorGate,
            );
            evaluations.push(evaluation);
        }
        Ok(evaluations)
    }
}

/// Configuration `k`'s exit codes under the gates' own names (the compile is every one's).
fn config_codes(codes: &BTreeMap<String, i32>, k: usize) -> BTreeMap<String, i32> {
    let mut out = BTreeMap::new();
    if let Some(c) = codes.get(Gate::Compile.name()) {
        out.insert(Gate::Compile.name().to_string(), *c);
    }
    for g in [Gate::Correctness, Gate::Performance] {
        if let Some(c) = codes.get(&config_step(k, g)) {
            out.insert(g.name().to_string(), *c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_reads_its_own_steps_and_the_shared_compile() {
        let codes: BTreeMap<String, i32> = [
            ("compile", 0),
            ("u0.correctness", 0),
            ("u0.performance", 0),
            ("u1.correctness", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let c0 = config_codes(&codes, 0);
        assert_eq!(
            c0.into_iter().collect::<Vec<_>>(),
            [
                ("compile".to_string(), 0),
                ("correctness".to_string(), 0),
                ("performance".to_string(), 0)
            ]
        );
        let c1 = config_codes(&codes, 1);
        assert_eq!(c1.get("correctness"), Some(&1));
        assert_eq!(c1.get("performance"), None);
        assert_eq!(config_codes(&codes, 2).len(), 1);
    }
}
