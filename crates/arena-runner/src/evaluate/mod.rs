//! The Evaluate API: one candidate of one task evaluated on request, with the same evaluator,
//! gates, result record and trust as the candidate phase of a run, at the rate a training loop
//! or a search needs. A task is named by a lockfile and its id or digest ([`catalog`]); the
//! candidate's files are staged as an agent's would be ([`candidate`]); a warm evaluator of the
//! task — an evaluator container kept between requests, its harness loaded and its original
//! kernel already evaluated — evaluates it in fresh kernel processes, on fresh inputs from a new
//! secret seed ([`warm`]); requests wait in a bounded line for one ([`pool`]); the answer is a
//! task result ([`answer`]).

mod answer;
mod candidate;
mod catalog;
mod pool;
#[cfg(test)]
mod test_double;
#[cfg(test)]
mod tests;
mod warm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arena_eval::record::Evaluation;
use arena_eval::GateTimeouts;
use arena_image::Store;
use arena_run::result::TaskResult;
use arena_runtime::ContainerRuntime;
use tokio::time::Instant;

pub use candidate::{digest as candidate_digest, Candidate};
pub use catalog::{Catalog, ServedTask};
pub use pool::{Pool, PoolSettings, Served, Warm, Warmer};
pub use warm::ContainerWarmer;

use crate::resources::Resources;
use crate::scheduler::GpuPool;

/// Why an evaluation was not made, by what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The request names something that is not there, or is malformed.
    #[error("{0}")]
    Invalid(String),
    /// The task cannot be served as it is (no trusted harness, a tree or image that differs
    /// from the lockfile, an original that fails its own gates).
    #[error("{0}")]
    Precondition(String),
    /// Too many requests are waiting: try again later.
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Deadline(String),
    #[error("{0}")]
    Internal(String),
}

/// The original kernel evaluated alone by a warm evaluator when it started.
#[derive(Debug, Clone)]
pub struct Baseline {
    pub evaluation: Evaluation,
    pub record: arena_eval::evaluator_record::EvaluatorRecord,
}

/// One evaluation of a candidate paired with the original.
#[derive(Debug, Clone)]
pub struct Evaluated {
    pub evaluation: Evaluation,
    /// The evaluator's record (seed, warnings, gate times).
    pub record: arena_eval::evaluator_record::EvaluatorRecord,
    /// Why the evaluator cannot take another request, where it cannot (it is stopped).
    pub retire: Option<String>,
}

pub struct EvalRequest {
    pub image_lock: PathBuf,
    pub task: String,
    pub files: BTreeMap<String, Vec<u8>>,
    pub request_id: String,
    /// The request's own time limit; None: twice the task's gate timeouts (a cold start
    /// evaluates the original first).
    pub timeout: Option<Duration>,
    /// How the candidate's evaluation is timed and checked (each None: the evaluator's default).
    pub timing: RequestTiming,
}

/// What one Evaluate request asks of its evaluation's timing; the original's own evaluation,
/// made when its warm evaluator started, keeps the defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestTiming {
    /// Pairs of timed batches per configuration (1 to [`arena_run::plan::MAX_TRUSTED_PAIRS`]).
    pub pairs: Option<u32>,
    /// Outputs of each timed batch checked on a GPU (0, every one, to
    /// [`arena_run::plan::MAX_CHECKED_CALLS`]).
    pub checked_calls: Option<u32>,
}

pub struct EvalReply {
    pub evaluation_id: String,
    pub result: TaskResult,
    pub queue: Duration,
    pub evaluate: Duration,
    pub warm: bool,
}

/// Where the Evaluate API keeps its evaluators, and how many requests it takes.
#[derive(Debug, Clone, Default)]
pub struct EvalSettings {
    pub pool: PoolSettings,
    /// The evaluators' and candidates' directories (made root only); None: a new temporary
    /// directory, removed with the evaluator.
    pub dir: Option<PathBuf>,
}

pub struct Evaluator {
    catalog: Catalog,
    pool: Arc<Pool>,
    dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    prefix: String,
    counter: AtomicU64,
}

fn private_dir(p: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(p)?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
}

/// The evaluator's directory (the configured one, else a new temporary one), made root only.
fn evaluator_dir(settings: &EvalSettings) -> std::io::Result<(PathBuf, Option<tempfile::TempDir>)> {
    let (dir, tmp) = match &settings.dir {
        Some(d) => (d.clone(), None),
        None => {
            let t = tempfile::Builder::new().prefix("arena-eval-").tempdir()?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    private_dir(&dir)?;
    private_dir(&dir.join("candidates"))?;
    Ok((dir, tmp))
}

impl Evaluator {
    /// An evaluator whose warm evaluators `warmer` starts, on `gpus`.
    pub fn new(
        warmer: Arc<dyn Warmer>,
        gpus: Arc<GpuPool>,
        settings: EvalSettings,
    ) -> std::io::Result<Evaluator> {
        let (dir, tmp) = evaluator_dir(&settings)?;
        Ok(Evaluator::assemble(warmer, gpus, settings, dir, tmp))
    }

    fn assemble(
        warmer: Arc<dyn Warmer>,
        gpus: Arc<GpuPool>,
        settings: EvalSettings,
        dir: PathBuf,
        tmp: Option<tempfile::TempDir>,
    ) -> Evaluator {
        Evaluator {
            catalog: Catalog::default(),
            pool: Pool::new(warmer, gpus, settings.pool),
            dir,
            _tmp: tmp,
            prefix: format!("eval-{}", crate::task_run::new_attempt()),
            counter: AtomicU64::new(0),
        }
    }

    /// An evaluator whose warm evaluators are containers on `rt`.
    pub fn containerd(
        rt: Arc<dyn ContainerRuntime>,
        store: Store,
        resources: Resources,
        gpus: Arc<GpuPool>,
        settings: EvalSettings,
    ) -> std::io::Result<Evaluator> {
        let (dir, tmp) = evaluator_dir(&settings)?;
        let warmer = ContainerWarmer {
            rt,
            store,
            resources,
            dir: dir.join("evaluators"),
            attempt: crate::task_run::new_attempt(),
            max_life: settings.pool.max_life,
            counter: AtomicU64::new(0),
        };
        private_dir(&warmer.dir)?;
        Ok(Evaluator::assemble(
            Arc::new(warmer),
            gpus,
            settings,
            dir,
            tmp,
        ))
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Evaluates one request.
    pub async fn evaluate(&self, req: EvalRequest) -> Result<EvalReply, EvalError> {
        let t0 = Instant::now();
        arena_run::plan::check_trusted_timing(req.timing.pairs, req.timing.checked_calls)
            .map_err(|e| EvalError::Invalid(e.to_string()))?;
        let task = self.catalog.task(&req.image_lock, &req.task)?;
        let timeout = req.timeout.unwrap_or_else(|| {
            Duration::from_secs(2 * GateTimeouts::for_task(&task.task.config).total())
        });
        let deadline = t0 + timeout;
        let candidate = candidate::stage(&task.task, req.files, &self.dir.join("candidates"))?;
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let evaluation_id = format!("{}-{n}", self.prefix);
        let span = tracing::info_span!("evaluate", id = %evaluation_id, task = %task.task.id);
        let served = tracing::Instrument::instrument(
            self.pool
                .evaluate(task.clone(), &candidate, req.timing, deadline),
            span,
        )
        .await?;
        let result = answer::task_result(
            &task,
            &evaluation_id,
            &candidate,
            &served,
            t0.elapsed().as_secs_f64(),
            &req.request_id,
        )?;
        Ok(EvalReply {
            evaluation_id,
            result,
            queue: served.queue,
            evaluate: served.evaluate,
            warm: served.warm,
        })
    }

    /// Stops every idle evaluator (a runner that ends).
    pub async fn shutdown(&self) {
        self.pool.shutdown().await;
    }
}
