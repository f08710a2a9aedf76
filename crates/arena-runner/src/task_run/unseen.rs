//! The unseen phase: the original and the agent's kernel on the task's hidden unseen
//! configurations. Private copies of the harness with the declaration rewritten are bound
//! over the image's, the task's hidden file is bound read-only, both only into these
//! evaluator containers, and the copies are removed afterwards. A list declaration
//! (`TEST_SHAPES`, parametrize) holds every configuration in one evaluation, and a kernel
//! that fails it is probed per configuration for the failure counts; `get_inputs()`
//! describes one configuration, so each is its own evaluation.

use std::collections::BTreeMap;
use std::path::Path;

use arena_eval::layout;
use arena_eval::record::{Evaluation, GateReport, GateStatus};
use arena_eval::sources::StagedSource;
use arena_eval::{read_probe, GateTimeouts, GatesJob};
use arena_proto::v1::EventKind;
use arena_run::events::Detail;
use arena_run::result::UnseenResult;
use arena_runtime::BindMount;
use arena_task::declarations::Declaration;
use arena_task::hidden::TaskUnseen;
use arena_task::split;

use super::evaluator::{gate_label, Phase};
use super::phase::{redact_error, ContainerPhase, UnseenStep};
use super::self_reported::SelfReportedRun;
use super::{bind, TaskRun};
use crate::error::{Result, RunnerError};

impl TaskRun<'_> {
    /// Both kernels on the task's unseen configurations (None: the run has no hidden set,
    /// or the set does not cover this task).
    pub(crate) async fn unseen(
        &self,
        staged: Option<&[StagedSource]>,
    ) -> Result<Option<UnseenResult>> {
        let (item, task) = (self.item, self.task);
        let Some(hidden) = &self.ctx.hidden else {
            return Ok(None);
        };
        let Some(file) = hidden.files.get(task.id.as_str()) else {
            return Ok(None);
        };
        let hidden_file = hidden.dir.join(file);
        let set: TaskUnseen = arena_task::hidden::read_task_set(&hidden_file, task.id.as_str())?;
        if self.trusted_harness().is_some() {
            let (original, optimized) = self.unseen_trusted(&set, &hidden_file, staged).await?;
            let optimized = optimized.unwrap_or_else(|| refused(&set));
            return Ok(Some(unseen_result(&hidden.digest, original, optimized)));
        }
        let private = self.ctx.rundir.item_dir(item).join("unseen-harness");
        let _ = std::fs::remove_dir_all(&private);
        let unseen = UnseenEval {
            run: self,
            decl: Declaration::parse(&set.declaration),
            files: std::iter::once(set.harness.clone())
                .chain(set.also.iter().cloned())
                .collect(),
            set: &set,
            private: &private,
        };
        let outcome = async {
            let original = unseen.kernel(ContainerPhase::UNSEEN_ORIGINAL, &[]).await?;
            let optimized = match staged {
                Some(s) => Some(unseen.kernel(ContainerPhase::UNSEEN_OPTIMIZED, s).await?),
                None => None,
            };
            Ok::<_, RunnerError>((original, optimized))
        }
        .await;
        let _ = std::fs::remove_dir_all(&private);
        let (original, optimized) = outcome?;
        let optimized = optimized.unwrap_or_else(|| refused(&set));
        // The task's own harness wrote these: its words and parameters may carry the hidden
        // configurations. Only statuses, names by index, and times are kept.
        let (mut original, mut optimized) = (original, optimized);
        original.evaluation = redact(original.evaluation);
        optimized.evaluation = redact(optimized.evaluation);
        Ok(Some(unseen_result(&hidden.digest, original, optimized)))
    }
}

fn unseen_result(
    digest: &str,
    original: KernelOnUnseen,
    optimized: KernelOnUnseen,
) -> UnseenResult {
    UnseenResult {
        set_digest: digest.to_string(),
        original: original.evaluation,
        optimized: optimized.evaluation,
        failures_by_category: optimized.failures,
        original_failures_by_category: original.failures,
        original_passed: original.passed,
        optimized_passed: optimized.passed,
    }
}

/// The agent's sources, refused by the evaluator: every configuration failed.
fn refused(set: &TaskUnseen) -> KernelOnUnseen {
    let evaluation = Evaluation::new(
        GateReport::new(
            GateStatus::Fail,
            Some("the agent's sources were refused".into()),
        ),
        GateReport::new(GateStatus::Skipped, None),
        Vec::new(),
    );
    KernelOnUnseen::judged(evaluation, set, vec![false; set.configs.len()])
}

/// What of a self-reported unseen evaluation may be kept: gate statuses, our own labels of
/// configurations (index and category, the part of an error before its first `: `), and case
/// times to four significant digits. The harness's words and parameters are dropped.
pub(crate) fn redact(mut e: Evaluation) -> Evaluation {
    for g in [&mut e.compile, &mut e.correctness] {
        g.extra.clear();
        if let Some(err) = &g.error {
            g.error = Some(redact_error(err));
        }
    }
    e.performance_error = e.performance_error.as_deref().map(redact_error);
    for c in &mut e.performance {
        c.extra.clear();
        if c.execution_time_ms.is_finite() && c.execution_time_ms > 0.0 {
            let digits = 3 - c.execution_time_ms.log10().floor() as i32;
            let scale = 10f64.powi(digits);
            c.execution_time_ms = (c.execution_time_ms * scale).round() / scale;
        }
    }
    e
}

/// One kernel's evaluation on the unseen configurations, whether it passes each one (by the
/// set's index), and the configurations it fails by category.
pub(crate) struct KernelOnUnseen {
    pub evaluation: Evaluation,
    pub passed: Vec<bool>,
    pub failures: BTreeMap<String, u32>,
}

impl KernelOnUnseen {
    pub(crate) fn judged(evaluation: Evaluation, set: &TaskUnseen, passed: Vec<bool>) -> Self {
        let mut failures = BTreeMap::new();
        for (k, c) in set.configs.iter().enumerate() {
            if !passed.get(k).copied().unwrap_or(false) {
                *failures.entry(c.category.as_str().to_string()).or_default() += 1;
            }
        }
        KernelOnUnseen {
            evaluation,
            passed,
            failures,
        }
    }
}

/// The agent's kernel parts of split declaration files, by task-relative path.
type Kernels = BTreeMap<String, String>;

/// What evaluating one task on its unseen set needs.
struct UnseenEval<'a> {
    run: &'a TaskRun<'a>,
    decl: Declaration,
    /// The files the declaration is rewritten in (relative to the task).
    files: Vec<String>,
    set: &'a TaskUnseen,
    /// The run directory's private copies (removed after the evaluations).
    private: &'a Path,
}

impl UnseenEval<'_> {
    /// The task's declaration files rewritten with `entries`: (relative path, text). Of a file
    /// split into kernel and tests, only the tests are rewritten, and the kernel part is the
    /// one `kernels` holds for it (the agent's) or else the task's own.
    fn variant_texts(
        &self,
        entries: &[String],
        kernels: &Kernels,
    ) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for rel in &self.files {
            let rel = rel.trim_start_matches("./");
            let host = self.run.task.dir.join(rel);
            let src = std::fs::read_to_string(&host).map_err(|e| RunnerError::io(&host, e))?;
            let bad = |e: String| RunnerError::invalid(host.display(), &self.set.declaration, e);
            let rewrite = |text: &str| {
                arena_task::declarations::rewrite(text, &self.decl, entries)
                    .map_err(|e| bad(e.to_string()))
            };
            let text = match split::harness_part(&src) {
                Some(tests) => {
                    let kernel = kernels
                        .get(rel)
                        .map(String::as_str)
                        .unwrap_or_else(|| split::kernel_part(&src));
                    split::splice(kernel, &rewrite(tests)?)
                        .ok_or_else(|| bad("the rewrite lost the line of #s".into()))?
                }
                None => rewrite(&src)?,
            };
            out.push((rel.to_string(), text));
        }
        Ok(out)
    }

    /// The kernel parts of the staged sources that are split declaration files, by path.
    fn kernels(&self, sources: &[StagedSource]) -> Result<Kernels> {
        let mut out = Kernels::new();
        for s in sources {
            let rel = s.rel.trim_start_matches("./");
            if !self.files.iter().any(|f| f.trim_start_matches("./") == rel)
                || !split::is_split(&self.run.task.dir, rel)
            {
                continue;
            }
            let text = std::fs::read_to_string(&s.host).map_err(|e| RunnerError::io(&s.host, e))?;
            out.insert(rel.to_string(), split::kernel_part(&text).to_string());
        }
        Ok(out)
    }

    /// `sources` with each split declaration file taken from the variant in `dir` (its
    /// kernel part is the agent's already), so that the tree gets the rewritten tests.
    fn over_variant(
        &self,
        sources: &[StagedSource],
        dir: &Path,
        kernels: &Kernels,
    ) -> Vec<StagedSource> {
        sources
            .iter()
            .map(|s| {
                let rel = s.rel.trim_start_matches("./");
                if kernels.contains_key(rel) {
                    StagedSource {
                        rel: s.rel.clone(),
                        host: dir.join(rel),
                    }
                } else {
                    s.clone()
                }
            })
            .collect()
    }

    /// Writes the task's declaration files rewritten with `entries` under `dir`.
    fn write_variant(&self, dir: &Path, entries: &[String], kernels: &Kernels) -> Result<()> {
        for (rel, text) in self.variant_texts(entries, kernels)? {
            let to = dir.join(&rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| RunnerError::io(parent, e))?;
            }
            std::fs::write(&to, text).map_err(|e| RunnerError::io(&to, e))?;
        }
        Ok(())
    }

    /// Read-only binds of a variant's files over the image's.
    fn binds(&self, dir: &Path) -> Vec<BindMount> {
        self.files
            .iter()
            .map(|rel| bind(dir.join(rel), &layout::source_path(rel), true))
            .collect()
    }

    fn entries(&self) -> Vec<String> {
        self.set.configs.iter().map(|c| c.entry.clone()).collect()
    }

    async fn evaluate(
        &self,
        phase: ContainerPhase,
        sources: &[StagedSource],
        dir: &Path,
    ) -> Result<Phase> {
        self.run
            .evaluate(phase, sources, &self.binds(dir), EventKind::EvaluatorGate)
            .await
    }

    /// One kernel (`sources` over the image's; none for the original) on the whole set.
    async fn kernel(
        &self,
        phase: ContainerPhase,
        sources: &[StagedSource],
    ) -> Result<KernelOnUnseen> {
        let n = self.set.configs.len();
        let kernels = self.kernels(sources)?;
        if self.decl.one_config_per_file() {
            // One container, one compile: each configuration's files are laid over the
            // kernel's tree before its steps (the agent's kernel part is in them already).
            let views = self.private.join(phase.to_string());
            for (k, entry) in self.entries().into_iter().enumerate() {
                self.write_variant(&views.join(k.to_string()), &[entry], &kernels)?;
            }
            let evals = self
                .run
                .evaluate_per_config(phase, sources, &views, n, &self.files)
                .await?;
            let passed: Vec<bool> = evals.iter().map(Evaluation::correct).collect();
            let evaluation = merge_per_config(evals, self.set);
            return Ok(KernelOnUnseen::judged(evaluation, self.set, passed));
        }
        let dir = self.private.join(phase.to_string());
        self.write_variant(&dir, &self.entries(), &kernels)?;
        let over = self.over_variant(sources, &dir, &kernels);
        let evaluation = self.evaluate(phase, &over, &dir).await?.evaluation;
        let passed = if evaluation.correct() {
            vec![true; n]
        } else if evaluation.compiled() {
            self.probe(phase.step(UnseenStep::Probe), sources, &kernels)
                .await?
        } else {
            vec![false; n]
        };
        Ok(KernelOnUnseen::judged(evaluation, self.set, passed))
    }

    /// Compiles once and runs correctness per configuration in one evaluator container.
    async fn probe(
        &self,
        phase: ContainerPhase,
        sources: &[StagedSource],
        kernels: &Kernels,
    ) -> Result<Vec<bool>> {
        let n = self.set.configs.len();
        let variants = self
            .entries()
            .into_iter()
            .map(|e| self.variant_texts(&[e], kernels))
            .collect::<Result<Vec<_>>>()?;
        let views = self
            .run
            .views(&self.private.join(phase.to_string()), &variants)?;
        let timeouts = GateTimeouts::for_task(&self.run.task.config);
        let mut job = GatesJob::probe(
            &self.run.task.config,
            &timeouts,
            n,
            &self.run.env,
            self.run.groups(),
        );
        job.quiet = true;
        let r = self
            .run
            .self_reported(SelfReportedRun {
                phase,
                job,
                sources,
                sources_apart: false,
                extra_binds: &[views],
            })
            .await?;
        let passed = read_probe(&r.out, n).unwrap_or_else(|| vec![false; n]);
        let failed = passed.iter().filter(|p| !**p).count();
        self.run.ctx.events.emit(
            EventKind::EvaluatorGate,
            Some(self.run.item),
            Detail {
                gpu: Some(self.run.gpu.index),
                gate: gate_label(phase, "per-configuration correctness"),
                passed: failed == 0,
                message: format!("{failed} of {n} unseen configurations fail"),
                ..Default::default()
            },
        );
        Ok(passed)
    }
}

/// One evaluation from the per-configuration evaluations of a `get_inputs()` task: it compiles
/// if every one did, is correct if every one is, and its cases are every configuration's,
/// named `u<k>.<case>`.
fn merge_per_config(evals: Vec<Evaluation>, set: &TaskUnseen) -> Evaluation {
    let label = |k: usize| {
        set.configs
            .get(k)
            .map(|c| format!("unseen configuration {k} ({})", c.category.as_str()))
            .unwrap_or_else(|| format!("unseen configuration {k}"))
    };
    let with_label = |k: usize, r: &GateReport| {
        let mut r = r.clone();
        r.error = Some(match &r.error {
            Some(e) => format!("{}: {e}", label(k)),
            None => label(k),
        });
        r
    };
    let compile = match evals.iter().position(|e| !e.compiled()) {
        Some(k) => with_label(k, &evals[k].compile),
        None => evals
            .first()
            .map(|e| e.compile.clone())
            .unwrap_or_else(|| GateReport::new(GateStatus::Fail, Some("no configurations".into()))),
    };
    let correctness = if !compile.passed() {
        GateReport::new(GateStatus::Skipped, None)
    } else {
        match evals.iter().position(|e| !e.correct()) {
            Some(k) => with_label(k, &evals[k].correctness),
            None => evals[0].correctness.clone(),
        }
    };
    let performance = if correctness.passed() {
        evals
            .iter()
            .enumerate()
            .flat_map(|(k, e)| {
                e.performance.iter().map(move |c| {
                    let mut c = c.clone();
                    c.test_case_id = format!("u{k}.{}", c.test_case_id);
                    c
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    Evaluation::new(compile, correctness, performance)
}
