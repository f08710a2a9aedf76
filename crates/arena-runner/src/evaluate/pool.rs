//! Warm evaluators and the line of requests waiting for one.
//!
//! A request is admitted only while fewer than `limit` are queued or running (else it is
//! refused at once: back-pressure the caller can see); it then waits, in order of arrival, for
//! one of as many evaluation slots as the runner has GPUs. With a slot it takes an idle
//! evaluator warm for its task, else starts one on a free GPU, else on the GPU of the evaluator
//! idle longest (which is stopped first), else waits for a GPU the runs hold. An evaluator goes
//! back to the idle ones after each evaluation and is stopped when idle past `idle` (its GPU
//! goes back to the runs) or once it has lived half of `max_life` (its container is killed at
//! `max_life`: an evaluation begun before the half has the other half). Whatever ends an
//! evaluation early — the request's deadline, the caller going away, an error — stops that
//! evaluator: the next request gets a fresh one, never one that may still be running someone
//! else's candidate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::candidate::Candidate;
use super::catalog::ServedTask;
use super::{Baseline, EvalError, Evaluated, RequestTiming};
use crate::gpus::Gpu;
use crate::scheduler::{GpuPool, Lease};

/// How long past a request's deadline an evaluator may take to answer before it is stopped.
const GRACE: Duration = Duration::from_secs(30);

/// A running evaluator of one task, on one GPU.
#[async_trait]
pub trait Warm: Send + Sync {
    /// Its name (the container's id).
    fn id(&self) -> &str;
    /// The original kernel evaluated alone when it started (a run's baseline phase).
    fn baseline(&self) -> &Baseline;
    /// Evaluates `candidate` against the original, timed and checked as `timing` asks (its
    /// Nones: the evaluator's defaults), to be done by `deadline`.
    async fn evaluate(
        &self,
        candidate: &Candidate,
        timing: RequestTiming,
        deadline: Instant,
    ) -> Result<Evaluated, EvalError>;
    /// Ends it; what it ran in is removed.
    async fn stop(&self);
    /// Whether it still runs (an idle one whose container ended is not handed out).
    fn alive(&self) -> bool {
        true
    }
}

/// Starts warm evaluators.
#[async_trait]
pub trait Warmer: Send + Sync + 'static {
    /// An evaluator of `task` on `gpu`, its baseline evaluated, by `deadline`.
    async fn start(
        &self,
        task: Arc<ServedTask>,
        gpu: Gpu,
        deadline: Instant,
    ) -> Result<Arc<dyn Warm>, EvalError>;
}

/// How many requests, how long an evaluator waits idle, how long it lives.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// Requests queued or running at once; more are refused (RESOURCE_EXHAUSTED).
    pub limit: usize,
    pub idle: Duration,
    pub max_life: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            limit: 256,
            idle: Duration::from_secs(60),
            max_life: Duration::from_secs(3600),
        }
    }
}

/// An evaluator and the GPU it holds.
struct Slot {
    warm: Arc<dyn Warm>,
    lease: Lease,
    key: String,
    started: Instant,
    idle_since: Instant,
}

/// What one evaluation was given: the evaluator, and whether it was already running.
pub struct Served {
    pub evaluated: Evaluated,
    pub warm: bool,
    pub evaluator: String,
    pub baseline: Baseline,
    pub gpu: Gpu,
    pub queue: Duration,
    pub evaluate: Duration,
}

pub struct Pool {
    warmer: Arc<dyn Warmer>,
    gpus: Arc<GpuPool>,
    slots: Arc<Semaphore>,
    admitted: AtomicUsize,
    settings: PoolSettings,
    idle: Mutex<Vec<Slot>>,
    /// Every task that holds a GPU lease for an evaluator (a start, a stop): `shutdown` waits
    /// for them, and nothing aborts one (its lease goes back only once it is done).
    tasks: tokio_util::task::TaskTracker,
}

/// A request counted among the admitted until dropped.
struct Admission<'a>(&'a AtomicUsize);

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An evaluator given to one request: back among the idle ones when released, stopped if the
/// request ends any other way (its future dropped included).
struct Busy<'a> {
    pool: &'a Pool,
    slot: Option<Slot>,
}

impl Busy<'_> {
    fn warm(&self) -> Arc<dyn Warm> {
        self.slot
            .as_ref()
            .expect("held until released")
            .warm
            .clone()
    }

    fn release(mut self) {
        if let Some(mut s) = self.slot.take() {
            if s.started.elapsed() >= self.pool.settings.max_life / 2 {
                self.pool.retire(s);
                return;
            }
            s.idle_since = Instant::now();
            self.pool.idle.lock().unwrap().push(s);
        }
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.slot.take() {
            self.pool.retire(s);
        }
    }
}

type Started = Result<(Arc<dyn Warm>, Lease), EvalError>;

/// A caller waiting for a start. If it goes away, an evaluator already started and sent is
/// taken out of the channel and stopped (dropped there, its GPU would go back at once); one
/// not sent yet finds the channel closed and is stopped by the start's task.
struct Waiting<'a> {
    pool: &'a Pool,
    rx: Option<tokio::sync::oneshot::Receiver<Started>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if let Ok(Ok((warm, lease))) = rx.try_recv() {
                self.pool.stop_then_free(warm, lease);
            }
        }
    }
}

impl Pool {
    pub fn new(warmer: Arc<dyn Warmer>, gpus: Arc<GpuPool>, settings: PoolSettings) -> Arc<Pool> {
        let n = gpus.gpus().len().max(1);
        let pool = Arc::new(Pool {
            warmer,
            gpus,
            slots: Arc::new(Semaphore::new(n)),
            admitted: AtomicUsize::new(0),
            settings,
            idle: Mutex::new(Vec::new()),
            tasks: tokio_util::task::TaskTracker::new(),
        });
        let weak = Arc::downgrade(&pool);
        let every =
            (pool.settings.idle / 2).clamp(Duration::from_millis(10), Duration::from_secs(5));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(p) = weak.upgrade() else { return };
                p.reap();
            }
        });
        pool
    }

    /// Requests admitted now (queued or being evaluated).
    pub fn admitted(&self) -> usize {
        self.admitted.load(Ordering::SeqCst)
    }

    /// Evaluators idle now.
    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap().len()
    }

    /// Stops an evaluator in a task of its own (whoever drops it may not wait); its GPU goes
    /// back only once it has stopped.
    fn retire(&self, s: Slot) {
        self.stop_then_free(s.warm, s.lease);
    }

    fn stop_then_free(&self, warm: Arc<dyn Warm>, lease: Lease) {
        self.tasks.spawn(async move {
            warm.stop().await;
            drop(lease);
        });
    }

    /// Stops the evaluators idle past the idle time or older than their life.
    fn reap(&self) {
        let gone: Vec<Slot> = {
            let mut idle = self.idle.lock().unwrap();
            let settings = &self.settings;
            let (gone, keep) = idle.drain(..).partition(|s| {
                s.idle_since.elapsed() >= settings.idle
                    || s.started.elapsed() >= settings.max_life / 2
            });
            *idle = keep;
            gone
        };
        for s in gone {
            self.retire(s);
        }
    }

    /// Stops every idle evaluator and waits until they, those already being stopped and those
    /// being started, are gone (a runner that ends: nothing of its evaluators is left
    /// running). Call it once no request is being served.
    pub async fn shutdown(&self) {
        let idle: Vec<Slot> = self.idle.lock().unwrap().drain(..).collect();
        for s in idle {
            self.retire(s);
        }
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Evaluates `candidate` for `task` (with `timing`, as [`Warm::evaluate`]) by `deadline`.
    pub async fn evaluate(
        &self,
        task: Arc<ServedTask>,
        candidate: &Candidate,
        timing: RequestTiming,
        deadline: Instant,
    ) -> Result<Served, EvalError> {
        let t0 = Instant::now();
        let n = self.admitted.fetch_add(1, Ordering::SeqCst);
        let _admission = Admission(&self.admitted);
        if n >= self.settings.limit {
            return Err(EvalError::Busy(format!(
                "the runner's evaluation queue is full ({} requests queued or running, the \
                 limit is {}); try again later",
                n, self.settings.limit
            )));
        }
        let _slot = tokio::time::timeout_at(deadline, self.slots.clone().acquire_owned())
            .await
            .map_err(|_| EvalError::Deadline("the deadline passed while queued".into()))?
            .map_err(|_| EvalError::Internal("the evaluation slots are closed".into()))?;
        let (slot, warm) = self.take(&task, deadline).await?;
        let queue = t0.elapsed();
        let (baseline, gpu, evaluator) = (
            slot.warm.baseline().clone(),
            slot.lease.gpu().clone(),
            slot.warm.id().to_string(),
        );
        let busy = Busy {
            pool: self,
            slot: Some(slot),
        };
        let t = Instant::now();
        let evaluated = match tokio::time::timeout_at(
            deadline + GRACE,
            busy.warm().evaluate(candidate, timing, deadline),
        )
        .await
        {
            Ok(r) => r?,
            Err(_) => {
                return Err(EvalError::Deadline(format!(
                    "the evaluator gave no answer within {} s of the deadline",
                    GRACE.as_secs()
                )))
            }
        };
        let evaluate = t.elapsed();
        if evaluated.retire.is_some() {
            drop(busy);
        } else {
            busy.release();
        }
        Ok(Served {
            evaluated,
            warm,
            evaluator,
            baseline,
            gpu,
            queue,
            evaluate,
        })
    }

    /// A new evaluator of `task` on the GPU of `lease`, started in a task of its own that
    /// holds the lease: if the caller goes away meanwhile, the evaluator is stopped once
    /// started and only then is its GPU given back (a failed start has stopped what it began).
    async fn start(
        &self,
        task: &Arc<ServedTask>,
        lease: Lease,
        deadline: Instant,
    ) -> Result<(Arc<dyn Warm>, Lease), EvalError> {
        let (tx, rx) = tokio::sync::oneshot::channel::<Started>();
        let (warmer, task) = (self.warmer.clone(), task.clone());
        self.tasks.spawn(async move {
            match warmer.start(task, lease.gpu().clone(), deadline).await {
                Ok(warm) => {
                    if let Err(Ok((warm, lease))) = tx.send(Ok((warm, lease))) {
                        warm.stop().await;
                        drop(lease);
                    }
                }
                Err(e) => {
                    drop(lease);
                    let _ = tx.send(Err(e));
                }
            }
        });
        let mut waiting = Waiting {
            pool: self,
            rx: Some(rx),
        };
        let rx = waiting.rx.as_mut().expect("taken only here and in drop");
        let started = rx
            .await
            .map_err(|_| EvalError::Internal("the evaluator's start was lost".into()));
        waiting.rx = None;
        started?
    }

    /// An evaluator of `task`: an idle one, else a new one on a free GPU, on the GPU of the
    /// evaluator idle longest, or on the next GPU the runs give back. True: it was warm.
    async fn take(
        &self,
        task: &Arc<ServedTask>,
        deadline: Instant,
    ) -> Result<(Slot, bool), EvalError> {
        loop {
            let idle_one = {
                let mut idle = self.idle.lock().unwrap();
                idle.iter()
                    .position(|s| s.key == task.key)
                    .map(|i| idle.remove(i))
            };
            match idle_one {
                Some(s) if s.warm.alive() => return Ok((s, true)),
                // Its container ended while it waited: stopped (its GPU goes back once it
                // has), and the next one looked for.
                Some(s) => self.retire(s),
                None => break,
            }
        }
        let holder = format!("evaluate {}", task.task.id);
        let lease = match self.gpus.try_lease(&holder) {
            Some(l) => l,
            None => {
                let victim = {
                    let mut idle = self.idle.lock().unwrap();
                    let oldest = idle
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, s)| s.idle_since)
                        .map(|(i, _)| i);
                    oldest.map(|i| idle.remove(i))
                };
                match victim {
                    // Stopped in a task of its own: a caller that goes away meanwhile does
                    // not give the GPU back before the victim is gone.
                    Some(v) => {
                        let lease = self
                            .tasks
                            .spawn(async move {
                                v.warm.stop().await;
                                v.lease
                            })
                            .await
                            .map_err(|e| {
                                EvalError::Internal(format!("stopping an evaluator: {e}"))
                            })?;
                        lease.relabel(&holder);
                        lease
                    }
                    None => tokio::time::timeout_at(deadline, self.gpus.lease(&holder))
                        .await
                        .map_err(|_| {
                            EvalError::Deadline(
                                "the deadline passed while every GPU was held by runs".into(),
                            )
                        })?,
                }
            }
        };
        let (warm, lease) = self.start(task, lease, deadline).await?;
        let now = Instant::now();
        Ok((
            Slot {
                warm,
                lease,
                key: task.key.clone(),
                started: now,
                idle_since: now,
            },
            false,
        ))
    }
}
