//! A warm evaluator in a container: the evaluator container a run's candidate phase uses (the
//! same directory layout, binds, read-only root, seccomp profile, capabilities and scratch file
//! systems), with arena's evaluator serving requests on a socket in a directory only root may
//! enter (arena_trusted/serve.py) instead of evaluating once. Per request the runner lays the
//! candidate's staged files into the candidate's kernel directory (read-only in the container)
//! and asks for one evaluation; the evaluator answers once its reports are written and every
//! trace of both kernels' processes is gone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arena_eval::aka_perf::Writer;
use arena_eval::evaluator_record::EvaluatorRecord;
use arena_eval::trusted::{self, Job, BASELINE, CANDIDATE, COMPILED};
use arena_eval::{collect, GateTimeouts, Reading};
use arena_image::Store;
use arena_runtime::{run_container, ContainerRuntime, RunOutcome, RunRequest};
use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;

use super::candidate::Candidate;
use super::catalog::ServedTask;
use super::pool::{Warm, Warmer};
use super::{Baseline, EvalError, Evaluated, RequestTiming};
use crate::gpus::Gpu;
use crate::resources::Resources;
use crate::task_run::{bind, copy_sources, evaluator_config, image_env, unusable, EvaluatorDir};

/// The largest answer taken from the evaluator (its answers are a few hundred bytes; its
/// reports go to files).
const MAX_MESSAGE: usize = 1 << 20;
/// Bytes of the evaluator's own output kept (its kernels' output goes nowhere: one log
/// serves every request, whoever sent it).
const LOG_CAP: u64 = 1 << 20;
/// How long the evaluator waits for the runner to connect.
const CONNECT_S: u64 = 300;

/// Starts warm evaluators as containers of the task's locked image.
pub struct ContainerWarmer {
    pub rt: Arc<dyn ContainerRuntime>,
    pub store: Store,
    pub resources: Resources,
    /// Where each evaluator's directory is made (root only).
    pub dir: PathBuf,
    /// This runner start's part of container ids.
    pub attempt: String,
    /// How long an evaluator's container may live.
    pub max_life: Duration,
    pub counter: AtomicU64,
}

fn internal(what: impl std::fmt::Display) -> EvalError {
    EvalError::Internal(what.to_string())
}

/// Cancels the container when dropped: a start abandoned half-way, or an evaluator dropped
/// without being stopped, leaves nothing running.
struct Stopper(Option<watch::Sender<bool>>);

impl Drop for Stopper {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(true);
        }
    }
}

#[async_trait]
impl Warmer for ContainerWarmer {
    async fn start(
        &self,
        task: Arc<ServedTask>,
        gpu: Gpu,
        deadline: Instant,
    ) -> Result<Arc<dyn Warm>, EvalError> {
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let id = format!("arena-eval-{}-{n}", self.attempt);
        let span =
            tracing::info_span!("evaluator", id = %id, task = %task.task.id, gpu = gpu.index);
        tracing::Instrument::instrument(self.start_as(id, task, gpu, deadline), span).await
    }
}

impl ContainerWarmer {
    async fn start_as(
        &self,
        id: String,
        task: Arc<ServedTask>,
        gpu: Gpu,
        deadline: Instant,
    ) -> Result<Arc<dyn Warm>, EvalError> {
        let t = &task.task;
        let found = arena_task::task_digest(&t.dir).map_err(internal)?;
        if found != task.task_digest {
            return Err(EvalError::Precondition(format!(
                "task {}: the tree at {} is {found}, the lockfile {} says {}",
                t.id,
                t.dir.display(),
                task.lock_path.display(),
                task.task_digest
            )));
        }
        let image = self
            .rt
            .ensure_image(&self.store, &task.image)
            .await
            .map_err(|e| match e {
                arena_runtime::RuntimeError::ImageMismatch { .. } => {
                    EvalError::Precondition(format!("task {}: {e}", t.id))
                }
                e => internal(format!("task {}: {e}", t.id)),
            })?;
        let env = image_env(&self.store, &task.image).map_err(internal)?;
        let dir = self.dir.join(&id);
        // Removed if the start fails before there is an evaluator to stop (which removes it).
        let mut made = RemoveOnDrop(Some(dir.clone()));
        let ed = EvaluatorDir::prepare(t, &dir).map_err(internal)?;
        let candidate_dir = ed.kernels.join(CANDIDATE.uid.to_string());
        std::fs::create_dir_all(&candidate_dir).map_err(internal)?;
        let ctl = dir.join("ctl");
        std::fs::create_dir_all(&ctl).map_err(internal)?;
        set_mode(&ctl, 0o700)?;
        let devices = gpu.profile.resolve().map_err(internal)?;
        let timeouts = GateTimeouts::for_task(&t.config);
        let harness = t.config.trusted_harness.as_deref().unwrap_or_default();
        let mut job = Job::new(
            harness,
            &[BASELINE, CANDIDATE],
            &timeouts,
            devices.additional_gids.clone(),
        );
        job.accelerator = gpu.has_device();
        job.serve = Some(format!("{}/{}", trusted::CTL, trusted::SOCKET));
        job.connect_s = Some(CONNECT_S);
        // The original's, eager and compiled: the task's own code, compiled once per evaluator.
        job.keep_scratch = vec![BASELINE.name, COMPILED.name];
        job.keep_processes = vec![BASELINE.name, COMPILED.name];
        job.quiet_kernels = true;
        let mut binds = ed.binds();
        binds.push(bind(&ctl, trusted::CTL, false));
        binds.push(ed.job(&dir, &job).map_err(internal)?);
        let limits = self.resources.limits(t.config.memory_limit, None);
        let cfg = evaluator_config(&env, devices, binds, limits, &[BASELINE, CANDIDATE]);
        let (tx, rx) = watch::channel(false);
        let stopper = Stopper(Some(tx));
        let req = RunRequest {
            id: id.clone(),
            image,
            config: cfg,
            timeout: self.max_life,
            log_dir: dir.join("logs"),
            log_cap: LOG_CAP,
            labels: Default::default(),
            cancel: Some(rx),
            on_started: None,
        };
        let rt = self.rt.clone();
        let container = tokio::spawn(async move { run_container(&rt, req).await });
        made.0 = None;
        let mut warm = ContainerWarm {
            id,
            dir,
            out: ed.out,
            candidate_dir,
            conn: Mutex::new(None),
            stopper: std::sync::Mutex::new(stopper),
            container: Mutex::new(Some(container)),
            requests: AtomicU64::new(0),
            baseline: None,
        };
        // From here every failure stops the container (and waits for it) before it is
        // reported: the caller gives the GPU back on an error.
        let b = match warm.ready(&ctl.join(trusted::SOCKET), t, deadline).await {
            Ok(b) => b,
            Err(e) => {
                warm.abort().await;
                return Err(e);
            }
        };
        warm.baseline = Some(b);
        tracing::info!("warm evaluator ready");
        Ok(Arc::new(warm))
    }
}

/// A directory removed when dropped, unless taken out first.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn set_mode(p: &Path, m: u32) -> Result<(), EvalError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).map_err(internal)
}

/// Connects to the evaluator's socket once it listens; fails if its container ends first or
/// the deadline passes.
async fn connect(
    path: &Path,
    warm: &ContainerWarm,
    deadline: Instant,
) -> Result<UnixStream, EvalError> {
    loop {
        if let Ok(s) = UnixStream::connect(path).await {
            return Ok(s);
        }
        let ended = warm
            .container
            .lock()
            .await
            .as_ref()
            .is_none_or(|h| h.is_finished());
        if ended {
            return Err(internal(
                "the evaluator's container ended before it listened (its log is in the \
                 evaluator's directory)",
            ));
        }
        if Instant::now() >= deadline {
            return Err(EvalError::Deadline(
                "the deadline passed while the evaluator started".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub struct ContainerWarm {
    id: String,
    dir: PathBuf,
    out: PathBuf,
    candidate_dir: PathBuf,
    conn: Mutex<Option<UnixStream>>,
    stopper: std::sync::Mutex<Stopper>,
    container: Mutex<Option<tokio::task::JoinHandle<arena_runtime::Result<RunOutcome>>>>,
    requests: AtomicU64,
    baseline: Option<Baseline>,
}

impl ContainerWarm {
    /// Connected, greeted, and the original evaluated alone (its baseline).
    async fn ready(
        &self,
        socket: &Path,
        t: &arena_task::Task,
        deadline: Instant,
    ) -> Result<Baseline, EvalError> {
        let conn = connect(socket, self, deadline).await?;
        *self.conn.lock().await = Some(conn);
        let hello = self.recv_until(deadline).await?;
        if hello.get("ready").and_then(|r| r.as_bool()) != Some(true) {
            return Err(internal(format!("the evaluator did not start: {hello}")));
        }
        let b = self
            .request(
                "baseline",
                &[BASELINE.name],
                RequestTiming::default(),
                deadline,
            )
            .await?;
        if let Some(why) = unusable(&b.evaluation) {
            return Err(EvalError::Precondition(format!(
                "task {}: the original kernel fails its own evaluation on this runner: {why}",
                t.id
            )));
        }
        Ok(Baseline {
            evaluation: b.evaluation,
            record: b.record,
        })
    }

    /// Stops it at once (a start that failed: nothing to wait for), and waits until its
    /// container is gone; its directory goes too.
    async fn abort(&self) {
        if let Some(tx) = self.stopper.lock().unwrap().0.take() {
            let _ = tx.send(true);
        }
        self.stop().await;
    }

    async fn send(&self, msg: &serde_json::Value) -> Result<(), EvalError> {
        let data = serde_json::to_vec(msg).map_err(internal)?;
        let mut conn = self.conn.lock().await;
        let c = conn
            .as_mut()
            .ok_or_else(|| internal("the evaluator is stopped"))?;
        let mut framed = (data.len() as u32).to_le_bytes().to_vec();
        framed.extend_from_slice(&data);
        c.write_all(&framed)
            .await
            .map_err(|e| internal(format!("the evaluator went away: {e}")))
    }

    /// The evaluator's next message, by `deadline` (and a grace: it ends an evaluation at
    /// the deadline itself and answers).
    async fn recv_until(&self, deadline: Instant) -> Result<serde_json::Value, EvalError> {
        let mut conn = self.conn.lock().await;
        let c = conn
            .as_mut()
            .ok_or_else(|| internal("the evaluator is stopped"))?;
        let read = async {
            let mut len = [0u8; 4];
            c.read_exact(&mut len).await?;
            let n = u32::from_le_bytes(len) as usize;
            if n > MAX_MESSAGE {
                return Err(std::io::Error::other(format!("a message of {n} bytes")));
            }
            let mut buf = vec![0u8; n];
            c.read_exact(&mut buf).await?;
            Ok(buf)
        };
        let buf = tokio::time::timeout_at(deadline + Duration::from_secs(30), read)
            .await
            .map_err(|_| EvalError::Deadline("the evaluator gave no answer in time".into()))?
            .map_err(|e| internal(format!("the evaluator went away: {e}")))?;
        serde_json::from_slice(&buf).map_err(|e| internal(format!("the evaluator's answer: {e}")))
    }

    /// One evaluation of `roles` as request `rid`: its reports read back, then removed.
    async fn request(
        &self,
        rid: &str,
        roles: &[&str],
        timing: RequestTiming,
        deadline: Instant,
    ) -> Result<Evaluated, EvalError> {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut msg = serde_json::json!({
            "op": "evaluate",
            "id": rid,
            "roles": roles,
            "deadline_s": left.as_secs_f64().max(0.001),
        });
        if let Some(p) = timing.pairs {
            msg["pairs"] = p.into();
        }
        if let Some(n) = timing.checked_calls {
            msg["checked_calls"] = n.into();
        }
        self.send(&msg).await?;
        let reply = self.recv_until(deadline).await?;
        if reply.get("ok").and_then(|o| o.as_bool()) != Some(true) {
            return Err(internal(format!(
                "the evaluator refused the request: {}",
                reply
                    .get("error")
                    .and_then(|e| e.as_str())
                    .unwrap_or("no reason given")
            )));
        }
        let out = self.out.join(rid);
        let mut record = EvaluatorRecord::read(&out);
        let how = Reading {
            writer: Writer::Arena,
            ..Reading::default()
        };
        let evaluation = collect(&out, &out, None, how);
        let _ = std::fs::remove_dir_all(&out);
        if let Some(last) = record.as_ref().and_then(EvaluatorRecord::failure) {
            return Err(if last.contains("deadline") {
                EvalError::Deadline(format!("arena's evaluator: {last}"))
            } else {
                internal(format!("arena's evaluator could not evaluate: {last}"))
            });
        }
        if let (Some(times), Some(r)) = (reply.get("times"), record.as_mut()) {
            r.note("warm_times", times.clone());
        }
        Ok(Evaluated {
            evaluation,
            record: record.unwrap_or_default(),
            retire: reply
                .get("retire")
                .and_then(|r| r.as_str())
                .map(str::to_string),
        })
    }
}

#[async_trait]
impl Warm for ContainerWarm {
    fn id(&self) -> &str {
        &self.id
    }

    fn baseline(&self) -> &Baseline {
        self.baseline
            .as_ref()
            .expect("a warm evaluator is handed out with its baseline")
    }

    async fn evaluate(
        &self,
        candidate: &Candidate,
        timing: RequestTiming,
        deadline: Instant,
    ) -> Result<Evaluated, EvalError> {
        // The candidate's kernel directory holds this candidate's files and nothing else.
        let _ = std::fs::remove_dir_all(&self.candidate_dir);
        std::fs::create_dir_all(&self.candidate_dir).map_err(internal)?;
        copy_sources(&candidate.staged, &candidate.rels, &self.candidate_dir).map_err(internal)?;
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        self.request(
            &format!("r{n}"),
            &[BASELINE.name, CANDIDATE.name],
            timing,
            deadline,
        )
        .await
    }

    fn alive(&self) -> bool {
        // Busy only while it is being stopped: then it is not alive either.
        match self.container.try_lock() {
            Ok(h) => h.as_ref().is_some_and(|h| !h.is_finished()),
            Err(_) => false,
        }
    }

    async fn stop(&self) {
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            self.send(&serde_json::json!({"op": "exit"})),
        )
        .await;
        *self.conn.lock().await = None;
        let handle = self.container.lock().await.take();
        if let Some(mut h) = handle {
            // The evaluator ends by itself once told (or once the connection is gone); the
            // container is killed if it has not within a few seconds.
            if tokio::time::timeout(Duration::from_secs(10), &mut h)
                .await
                .is_err()
            {
                if let Some(tx) = self.stopper.lock().unwrap().0.take() {
                    let _ = tx.send(true);
                }
                let _ = tokio::time::timeout(Duration::from_secs(60), &mut h).await;
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
