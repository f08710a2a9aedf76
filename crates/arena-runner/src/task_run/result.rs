//! The result phase: the task result record — evaluations, trust level, every digest it
//! depends on, timings, containers — written atomically to `result.json`, the one mark of a
//! finished task run.

use std::path::Path;

use arena_digest::Digest;
use arena_eval::cross_check::{cross_check, CrossCheck, Verdict};
use arena_eval::evaluator_record::EvaluatorRecord;
use arena_eval::paired::{self, median_wall};
use arena_eval::record::{Evaluation, GateReport, GateStatus, PerfCase};
use arena_run::result::{
    ContainerRecord, GpuRecord, Provenance, TaskResult, Timings, Trust, UnseenResult,
};
use arena_runtime::{ImageRef, RunOutcome};

use super::agent::AgentRun;
use super::evaluator::{Candidate, Phase};
use super::TaskRun;
use crate::error::{Result, RunnerError};

/// Everything the phases of a task run produced.
pub(crate) struct Parts {
    pub baseline: Phase,
    pub agent: AgentRun,
    pub candidate: Candidate,
    pub unseen: Option<UnseenResult>,
    pub timings: Timings,
}

/// A container's record; its logs named relative to the run directory.
pub(crate) fn container_record(root: &Path, o: &RunOutcome) -> ContainerRecord {
    let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    ContainerRecord {
        id: o.id.clone(),
        exit_code: o.exit_code,
        timed_out: o.timed_out,
        create_s: o.durations.create_s,
        start_s: o.durations.start_s,
        run_s: o.durations.run_s,
        teardown_s: o.durations.teardown_s,
        stdout: Some(rel(&o.stdout)),
        stderr: Some(rel(&o.stderr)),
        stdout_truncated: o.stdout_truncated,
        stderr_truncated: o.stderr_truncated,
    }
}

fn digest(what: &str, s: &str) -> Result<Digest> {
    Digest::parse(s).map_err(|e| RunnerError::Other(format!("{what}: {e}")))
}

/// Wall seconds of the performance step's commands, from the gate runner's record.
fn performance_wall_s(record: &EvaluatorRecord) -> Option<f64> {
    let walls: Vec<f64> = record
        .commands
        .as_ref()?
        .iter()
        .filter(|c| c.step == "performance")
        .filter_map(|c| c.wall_s)
        .collect();
    (!walls.is_empty()).then(|| walls.iter().sum())
}

impl TaskRun<'_> {
    /// The candidate's self-reported times against arena's clock (None: a wall time is
    /// missing, which happens only if a gate runner failed). A paired evaluation is checked
    /// round by round (each round's reported times against that round's two commands: the
    /// score takes the median of the rounds' ratios, so a harness that lied in half its rounds
    /// must be caught in those), then summarized by the medians.
    fn cross_check(&self, baseline: &Phase, candidate: Option<&Phase>) -> Option<CrossCheck> {
        let cand = candidate?;
        let calls = arena_task::iterations::calls_per_case(&self.task.dir, &self.task.config);
        let floor = cand.evaluation.device_floor_ms;
        let (base_walls, cand_walls) = paired::run_walls(cand.record.as_ref()?);
        if let (Some(bw), Some(cw)) = (median_wall(&base_walls), median_wall(&cand_walls)) {
            let rounds = paired::round_walls(cand.record.as_ref()?);
            if let Some(mut check) = paired::first_inconsistent_round(
                &cand.evaluation.performance,
                &rounds,
                calls,
                floor,
            ) {
                check.runs_per_kernel = Some(cand_walls.len());
                return Some(check);
            }
            let base: Vec<PerfCase> = cand
                .evaluation
                .performance
                .iter()
                .filter_map(|c| {
                    let b = c.pairing.baseline_ms?;
                    Some(PerfCase::new(&c.test_case_id, b))
                })
                .collect();
            let mut check = cross_check(&base, bw, &cand.evaluation.performance, cw, calls, floor);
            check.runs_per_kernel = Some(cand_walls.len());
            return Some(check);
        }
        let base_wall = performance_wall_s(baseline.record.as_ref()?)?;
        let cand_wall = performance_wall_s(cand.record.as_ref()?)?;
        Some(cross_check(
            &baseline.evaluation.performance,
            base_wall,
            &cand.evaluation.performance,
            cand_wall,
            calls,
            floor,
        ))
    }

    fn provenance(&self, agent_image: &ImageRef) -> Result<Provenance> {
        let ctx = self.ctx;
        let task = digest(
            "task digest",
            self.rec.task_digest.as_deref().unwrap_or_default(),
        )?;
        let harness = arena_task::harness_digest(&self.task.dir, &self.task.agent_files)?;
        let lockfile = digest("lockfile digest", &ctx.record.lock_digest)?;
        Ok(Provenance {
            agent_image: Some(agent_image.manifest.clone()),
            agent: Some(digest("agent digest", &ctx.agent.digest)?),
            evaluator: self
                .trusted_harness()
                .map(|_| arena_eval::trusted::digest()),
            unseen_set: match &ctx.hidden {
                Some(h) if h.files.contains_key(self.task.id.as_str()) => {
                    Some(digest("hidden set digest", &h.digest)?)
                }
                _ => None,
            },
            ..Provenance::new(
                ctx.record.run_id.clone(),
                task,
                harness,
                self.image.manifest.clone(),
                lockfile,
            )
        })
    }

    pub(crate) fn write_result(&self, p: Parts) -> Result<TaskResult> {
        let ctx = self.ctx;
        let root = &ctx.rundir.root;
        let mut result = TaskResult::new(
            self.task.id.clone(),
            self.task.config.task_type.as_str(),
            self.item.repeat,
            p.baseline.evaluation.clone(),
            p.candidate.evaluation.clone(),
        );
        result.trust = if self.trusted_harness().is_some() {
            Trust::Trusted
        } else {
            result.trust_reason = self.trust_reason();
            Trust::SelfReported
        };
        if self.trusted_harness().is_none() && result.candidate.correct() {
            let check = self.cross_check(&p.baseline, p.candidate.phase.as_ref());
            if let Some(c) = &check {
                if c.verdict != Verdict::Partial {
                    result.trust = Trust::SelfReportedCrossChecked;
                }
            }
            result.cross_check = check;
        }
        for (phase, record) in [
            ("baseline", &p.baseline.record),
            (
                "candidate",
                &p.candidate.phase.as_ref().and_then(|c| c.record.clone()),
            ),
        ] {
            if let Some(r) = record {
                result.evaluators.insert(phase.into(), r.clone());
            }
        }
        result.unseen = p.unseen;
        result.provenance = Some(self.provenance(&p.agent.image)?);
        for (phase, window) in [
            ("baseline", &p.baseline.device),
            (
                "candidate",
                &p.candidate.phase.as_ref().and_then(|c| c.device.clone()),
            ),
        ] {
            if let Some(w) = window {
                result.device.insert(phase.into(), w.clone());
            }
        }
        result.gpu = Some(GpuRecord {
            index: self.gpu.index,
            kind: self.gpu.kind.clone(),
        });
        result.containers.insert(
            "baseline".into(),
            container_record(root, &p.baseline.outcome),
        );
        result
            .containers
            .insert("agent".into(), container_record(root, &p.agent.outcome));
        if let Some(c) = &p.candidate.phase {
            result
                .containers
                .insert("candidate".into(), container_record(root, &c.outcome));
        }
        result.candidate_refused = p.candidate.refused;
        let mut timings = p.timings;
        timings.breakdown = Some(super::breakdown::breakdown(
            &timings,
            &result.containers,
            &result.evaluators,
        ));
        result.timings = Some(timings);
        result.extra.insert(
            "agent".into(),
            serde_json::json!({ "name": ctx.agent.name }),
        );
        arena_run::rundir::write_json(&ctx.rundir.result_path(self.item), &result)?;
        Ok(result)
    }

    /// A probe's result, written atomically: the original on the hidden set and where it
    /// ran; baseline and candidate skipped, saying why.
    pub(crate) fn probe_result(
        &self,
        unseen: Option<UnseenResult>,
        timings: Timings,
    ) -> Result<TaskResult> {
        let skipped = || {
            Evaluation::new(
                GateReport::new(
                    GateStatus::Skipped,
                    Some("a probe of unseen configurations: the original kernel only".into()),
                ),
                GateReport::new(GateStatus::Skipped, None),
                Vec::new(),
            )
        };
        let mut result = TaskResult::new(
            self.task.id.clone(),
            self.task.config.task_type.as_str(),
            self.item.repeat,
            skipped(),
            skipped(),
        );
        result.trust = if self.trusted_harness().is_some() {
            Trust::Trusted
        } else {
            result.trust_reason = self.trust_reason();
            Trust::SelfReported
        };
        result.unseen = unseen;
        result.gpu = Some(GpuRecord {
            index: self.gpu.index,
            kind: self.gpu.kind.clone(),
        });
        result.timings = Some(timings);
        result.probe = Some(arena_run::ProbeRun {
            image: self.image.manifest.to_string(),
        });
        arena_run::rundir::write_json(&self.ctx.rundir.result_path(self.item), &result)?;
        Ok(result)
    }
}
