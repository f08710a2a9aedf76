//! An evaluator container, as the baseline, candidate and unseen phases run one: a fresh
//! container running a generated gate script over the image's task — the harness from the
//! image, the agent's staged sources bound read-only over the task's own files, no network,
//! the task run's GPU — and its reports read back into an [`Evaluation`]. The candidate phase
//! stages the agent's declared sources first; sources the evaluator refuses to take fail the
//! candidate, with the reason, and no container sees them. (The Evaluate API, a warm evaluator
//! answering requests, is `crate::evaluate`.)

use arena_eval::aka_perf::{Side, Writer};
use arena_eval::collect::read_codes;
use arena_eval::evaluator_record::{EvaluatorRecord, FloorProbe};
use arena_eval::paired::{self, PairedPlan};
use arena_eval::record::{Evaluation, GateReport, GateStatus};
use arena_eval::self_reported::{Overlay, CANDIDATE_SOURCES, REPORTS};
use arena_eval::sources::StagedSource;
use arena_eval::{collect, stage_sources, GateTimeouts, GatesJob, Reading};
use arena_proto::v1::EventKind;
use arena_run::events::Detail;
use arena_runtime::{BindMount, RunOutcome};

use super::phase::ContainerPhase;
use super::self_reported::{timeout_note, SelfReportedOut, SelfReportedRun};
use super::trusted::TrustedRun;
use super::TaskRun;
use crate::device_state;
use crate::error::{Result, RunnerError};
use arena_eval::trusted::{Role, BASELINE, CANDIDATE};

/// One evaluation and the container that produced it.
pub(crate) struct Phase {
    pub evaluation: Evaluation,
    pub outcome: RunOutcome,
    /// The trusted evaluator's own record (its seed, warnings, gate times), where it ran.
    pub record: Option<EvaluatorRecord>,
    /// The accelerator's state while it ran (a real GPU's only).
    pub device: Option<arena_run::result::DeviceWindow>,
}

impl Phase {
    /// A phase of a self-reported evaluator container: `evaluation`, made from its reports.
    fn of_gates(evaluation: Evaluation, r: SelfReportedOut) -> Phase {
        Phase {
            evaluation,
            outcome: r.outcome,
            record: r.record,
            device: None,
        }
    }
}

/// The candidate phase: what the evaluator made of the agent's sources.
pub(crate) struct Candidate {
    pub evaluation: Evaluation,
    /// The evaluator container, where the sources were taken.
    pub phase: Option<Phase>,
    pub staged: Option<Vec<StagedSource>>,
    /// Why the sources were refused.
    pub refused: Option<String>,
}

impl Candidate {
    pub fn staged(&self) -> Option<&[StagedSource]> {
        self.staged.as_deref()
    }
}

/// What is kept of a workspace after the agent, at most.
pub(crate) const KEPT_CAP: u64 = 64 << 20;

/// Copies the regular files below `from` into `to` (links and special files are skipped, and
/// nothing is read past `cap` bytes in all). Returns the bytes kept.
pub(crate) fn keep_files(from: &std::path::Path, to: &std::path::Path, cap: u64) -> u64 {
    let mut kept = 0u64;
    for r in super::files::regular_files(from) {
        let Ok(bytes) = arena_eval::untrusted::read_beneath(from, &r, cap.saturating_sub(kept))
        else {
            continue;
        };
        let dest = to.join(&r);
        if let Some(p) = dest.parent() {
            let _ = std::fs::create_dir_all(p);
        }
        if std::fs::write(&dest, &bytes).is_ok() {
            kept += bytes.len() as u64;
        }
    }
    kept
}

/// Gate names in events: the unseen evaluations say which they are.
pub(crate) fn gate_label(phase: ContainerPhase, gate: &str) -> String {
    if phase.sees_hidden() {
        format!("{phase} {gate}")
    } else {
        gate.to_string()
    }
}

impl TaskRun<'_> {
    /// The task's files' size: each kernel's tree holds a copy.
    pub(crate) fn task_bytes(&self) -> Result<u64> {
        Ok(arena_task::task_tree(&self.task.dir)?
            .iter()
            .map(|e| match e.kind {
                arena_task::EntryKind::File { size, .. } => size,
                _ => 0,
            })
            .sum())
    }

    /// The gates job of one kernel in its tree, the original (no `sources`) or the agent's,
    /// and how its reports are read.
    pub(crate) fn kernel_job(&self, sources: &[StagedSource]) -> Result<(GatesJob, Reading<'_>)> {
        let (role, side) = if sources.is_empty() {
            (BASELINE, Side::Baseline)
        } else {
            (CANDIDATE, Side::Candidate)
        };
        let job = GatesJob::gates(
            &self.task.config,
            &GateTimeouts::for_task(&self.task.config),
            &self.env,
            self.groups(),
            role,
            self.task_bytes()?,
        );
        let how = Reading {
            task_type: self.task.config.task_type.as_str(),
            side,
            writer: Writer::Harness,
        };
        Ok((job, how))
    }

    /// One gated evaluation by the task's own commands in a fresh evaluator container: the
    /// original kernel (no `sources`) or the agent's (its sources bound over the image's
    /// task), in its tree as its user, with an event per gate reached.
    pub(crate) async fn evaluate(
        &self,
        phase: ContainerPhase,
        sources: &[StagedSource],
        extra_binds: &[BindMount],
        event: EventKind,
    ) -> Result<Phase> {
        let (mut job, how) = self.kernel_job(sources)?;
        job.quiet = phase.sees_hidden();
        let r = self
            .self_reported(SelfReportedRun {
                phase,
                job,
                sources,
                sources_apart: false,
                extra_binds,
            })
            .await?;
        let note = r.timeout_note.as_deref();
        let evaluation = collect(&r.out, &r.out.join(REPORTS), note, how);
        self.gate_events(phase, &evaluation, event);
        Ok(Phase::of_gates(evaluation, r))
    }

    /// The agent's kernel and the original in one evaluator container, their performance
    /// runs interleaved in `pairs` rounds of a balanced random order (arena_eval::paired):
    /// the candidate's gates, and its cases paired with the original's.
    pub(crate) async fn evaluate_paired(
        &self,
        phase: ContainerPhase,
        staged: &[StagedSource],
        pairs: u32,
        event: EventKind,
    ) -> Result<Phase> {
        let mut seed = [0u8; 8];
        getrandom::fill(&mut seed).expect("the kernel's random source is available");
        let plan = PairedPlan::new(pairs, u64::from_le_bytes(seed));
        let overlay = staged
            .iter()
            .map(|s| {
                let rel = s.rel.trim_start_matches("./").to_string();
                Overlay {
                    from: format!("{CANDIDATE_SOURCES}/{rel}"),
                    rel,
                }
            })
            .collect();
        let timeouts = GateTimeouts::for_task(&self.task.config);
        let job = GatesJob::paired(
            &self.task.config,
            &timeouts,
            &self.env,
            self.groups(),
            &plan,
            overlay,
            self.task_bytes()?,
        );
        let mut r = self
            .self_reported(SelfReportedRun {
                phase,
                job,
                sources: staged,
                sources_apart: true,
                extra_binds: &[],
            })
            .await?;
        let note = r.timeout_note.as_deref();
        let codes = read_codes(&r.out);
        let mut evaluation = arena_eval::collect::gates(&codes, &r.out.join(REPORTS), note);
        paired::fill(
            &mut evaluation,
            &r.out,
            &codes,
            &plan,
            self.task.config.task_type.as_str(),
            note,
        );
        let floor = r.record.as_ref().and_then(|rec| rec.floor.as_ref());
        evaluation.device_floor_ms = floor.and_then(FloorProbe::floor_ms);
        // No floor is no check: a probe that failed (it runs beside the original's compile
        // only) leaves the times unchecked, so they are not scored.
        let probe_failed = floor.and_then(|f| f.error.clone());
        if let (true, None, Some(e)) = (
            evaluation.correct(),
            &evaluation.performance_error,
            probe_failed,
        ) {
            evaluation.performance_error =
                Some(format!("the device's floor could not be measured: {e}"));
        }
        if let Some(rec) = r.record.as_mut() {
            rec.note("plan", serde_json::to_value(&plan).unwrap_or_default());
        }
        self.gate_events(phase, &evaluation, event);
        Ok(Phase::of_gates(evaluation, r))
    }

    /// The supplementary groups of the GPU's device nodes (harness and kernel processes need
    /// them to open the devices).
    pub(crate) fn groups(&self) -> Vec<u32> {
        self.gpu
            .profile
            .resolve()
            .map(|g| g.additional_gids)
            .unwrap_or_default()
    }

    /// One evaluation of the original kernel (and the agent's, where `staged` is given) in
    /// the task's mode: arena's trusted evaluator where the task has a trusted harness, else
    /// the task's own gate commands.
    pub(crate) async fn evaluate_kernels(
        &self,
        phase: ContainerPhase,
        staged: Option<&[StagedSource]>,
        event: EventKind,
    ) -> Result<Phase> {
        let watch = device_state::reader_for(self.gpu)
            .map(|reader| device_state::watch(reader, device_state::EVERY));
        let mut p = self.evaluate_kernels_unwatched(phase, staged, event).await;
        if let Some(w) = watch {
            let window = w.finish().await;
            for warning in &window.warnings {
                tracing::warn!(phase = %phase, "{warning}");
            }
            if let Ok(p) = p.as_mut() {
                p.device = Some(window);
            }
        }
        p
    }

    async fn evaluate_kernels_unwatched(
        &self,
        phase: ContainerPhase,
        staged: Option<&[StagedSource]>,
        event: EventKind,
    ) -> Result<Phase> {
        if self.trusted_harness().is_none() {
            let pairs = self.ctx.record.perf_pairs.unwrap_or(paired::DEFAULT_PAIRS);
            return match staged {
                Some(s) if pairs > 0 => self.evaluate_paired(phase, s, pairs, event).await,
                _ => {
                    self.evaluate(phase, staged.unwrap_or(&[]), &[], event)
                        .await
                }
            };
        }
        let roles: &[Role] = if staged.is_some() {
            &[BASELINE, CANDIDATE]
        } else {
            &[BASELINE]
        };
        let t = match self
            .trusted(TrustedRun {
                phase,
                roles,
                candidate: staged,
                hidden: None,
            })
            .await
        {
            // The derived harness was refused: this phase, and the rest of the task run,
            // by the task's own commands (trusted_harness() is None from now on).
            Err(RunnerError::NotDerivable(_)) => {
                return Box::pin(self.evaluate_kernels_unwatched(phase, staged, event)).await
            }
            r => r?,
        };
        let timeouts = GateTimeouts::for_task(&self.task.config);
        let note = timeout_note(&t.outcome, timeouts.total());
        let how = Reading {
            writer: Writer::Arena,
            ..Reading::default()
        };
        let evaluation = collect(&t.out, &t.out, note.as_deref(), how);
        self.gate_events(phase, &evaluation, event);
        Ok(Phase {
            evaluation,
            outcome: t.outcome,
            record: t.record,
            device: None,
        })
    }

    pub(crate) fn gate_events(
        &self,
        phase: ContainerPhase,
        evaluation: &Evaluation,
        event: EventKind,
    ) {
        // A harness's words on hidden configurations may name them: unseen phases tell
        // only arena's own labels.
        let unseen = phase.sees_hidden();
        let emit = |gate: &str, passed: bool, message: String| {
            let message = if unseen && !message.is_empty() && !passed {
                super::phase::redact_error(&message)
            } else {
                message
            };
            self.ctx.events.emit(
                event,
                Some(self.item),
                Detail {
                    gpu: Some(self.gpu.index),
                    gate: gate_label(phase, gate),
                    passed,
                    message,
                    ..Default::default()
                },
            )
        };
        for (gate, r) in [
            ("compile", &evaluation.compile),
            ("correctness", &evaluation.correctness),
        ] {
            if r.status != GateStatus::Skipped {
                emit(gate, r.passed(), r.error.clone().unwrap_or_default());
            }
        }
        if evaluation.correct() {
            let ok = evaluation.performance_error.is_none()
                && !evaluation.performance.is_empty()
                && evaluation.performance.iter().all(|c| c.measured());
            let message = match &evaluation.performance_error {
                Some(why) => why.clone(),
                None => format!("{} cases", evaluation.performance.len()),
            };
            emit("performance", ok, message);
        }
    }

    /// The agent's declared sources, taken out of its workspace as regular files.
    fn stage(&self) -> std::result::Result<Vec<StagedSource>, String> {
        let dir = self.ctx.rundir.item_dir(self.item);
        stage_sources(
            &dir.join("workspace"),
            &self.task.agent_files,
            &self.task.dir,
            &dir.join("staged/candidate"),
        )
        .map_err(|e| e.to_string())
    }

    /// The agent's sources staged again for a later unseen evaluation; None if refused.
    /// The agent's sources as the candidate phase took them, staged again for a later
    /// unseen evaluation; None if they were refused.
    pub(crate) fn restage(&self) -> Result<Option<Vec<StagedSource>>> {
        let dir = self.ctx.rundir.item_dir(self.item);
        let stage = dir.join("staged/unseen");
        let _ = std::fs::remove_dir_all(&stage);
        Ok(stage_sources(
            &dir.join("staged/candidate"),
            &self.task.agent_files,
            &self.task.dir,
            &stage,
        )
        .ok())
    }

    /// Keeps what the agent left (regular files, up to [`KEPT_CAP`] bytes in all, no link
    /// followed) in `workspace.kept`, then releases the workspace's file system.
    pub(crate) async fn release_workspace(&self) -> Result<()> {
        let dir = self.ctx.rundir.item_dir(self.item);
        let (ws, kept) = (dir.join("workspace"), dir.join("workspace.kept"));
        let (w2, k2) = (ws.clone(), kept.clone());
        let _ = tokio::task::spawn_blocking(move || keep_files(&w2, &k2, KEPT_CAP)).await;
        self.ctx
            .rt
            .unmount_scratch(&ws)
            .await
            .map_err(|e| self.ctx.runtime_err(self.item, e))
    }

    /// The candidate phase: the agent's sources staged and evaluated, or refused. The
    /// workspace is released once they are taken.
    pub(crate) async fn candidate(&self) -> Result<Candidate> {
        let staged = self.stage();
        self.release_workspace().await?;
        match staged {
            Ok(staged) => {
                let p = self
                    .evaluate_kernels(
                        ContainerPhase::Candidate,
                        Some(&staged),
                        EventKind::EvaluatorGate,
                    )
                    .await?;
                Ok(Candidate {
                    evaluation: p.evaluation.clone(),
                    phase: Some(p),
                    staged: Some(staged),
                    refused: None,
                })
            }
            // The agent left something the evaluator refuses to take: its work fails to
            // compile, with the reason, and no container sees it.
            Err(why) => {
                self.ctx.events.emit(
                    EventKind::EvaluatorGate,
                    Some(self.item),
                    Detail {
                        gpu: Some(self.gpu.index),
                        gate: "compile".into(),
                        passed: false,
                        message: why.clone(),
                        ..Default::default()
                    },
                );
                Ok(Candidate {
                    evaluation: Evaluation::new(
                        GateReport::new(GateStatus::Fail, Some(why.clone())),
                        GateReport::new(GateStatus::Skipped, None),
                        Vec::new(),
                    ),
                    phase: None,
                    staged: None,
                    refused: Some(why),
                })
            }
        }
    }
}
