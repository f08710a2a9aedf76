//! The gRPC face of the engine (`arena.v1.Runner`). Every RPC has an authenticated caller
//! (auth.rs); a run belongs to the caller that submitted it, and only it or an admin may watch,
//! read or cancel it. Paths a caller names are checked against what it may read and write
//! (client_paths.rs) before the runner touches them.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use arena_proto::v1::runner_server::Runner;
use arena_proto::v1::{
    CancelRunRequest, EvaluateRequest, EvaluateResponse, EvaluateUnseenRequest, GetRunRequest, Gpu,
    ListGpusRequest, ListGpusResponse, RunEvent, RunState, RunStatus, SubmitRunRequest,
    SubmitRunResponse, WatchRunRequest,
};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use arena_run::events::is_terminal;
use arena_run::{RunError, RunRequest};

use crate::auth::caller;
use crate::client_paths::Access;
use crate::engine::{Engine, RunHandle};
use crate::error::RunnerError;
use crate::evaluate::{EvalError, EvalRequest, RequestTiming};

pub struct RunnerService {
    pub engine: Arc<Engine>,
}

impl RunnerService {
    pub fn new(engine: Arc<Engine>) -> Self {
        RunnerService { engine }
    }

    /// The service behind `auth`: every RPC is refused unless it names its caller.
    pub fn into_server(
        self,
        auth: crate::auth::Authenticator,
    ) -> tonic::service::interceptor::InterceptedService<
        arena_proto::v1::runner_server::RunnerServer<RunnerService>,
        crate::auth::Authenticator,
    > {
        arena_proto::v1::runner_server::RunnerServer::with_interceptor(self, auth)
    }

    /// The run `id`, if `who` may act on it (PermissionDenied for another identity's run;
    /// run ids are random, so knowing one is not guessing one).
    fn handle(&self, id: &str, who: &str) -> Result<Arc<RunHandle>, Status> {
        let h = self
            .engine
            .run(id)
            .ok_or_else(|| Status::not_found(format!("no run {id} on this runner")))?;
        self.engine
            .policy
            .check_owner(&h.record, Some(who))
            .map_err(status_of)?;
        Ok(h)
    }
}

fn status_of(e: RunnerError) -> Status {
    match &e {
        RunnerError::Run(RunError::Drift { .. }) => Status::failed_precondition(e.to_string()),
        RunnerError::Run(
            RunError::Invalid { .. }
            | RunError::TaskConfig(_)
            | RunError::Task(_)
            | RunError::Image(_),
        ) => Status::invalid_argument(e.to_string()),
        RunnerError::PermissionDenied(_) => Status::permission_denied(e.to_string()),
        _ => Status::internal(e.to_string()),
    }
}

/// What SubmitRun and EvaluateUnseen answer: the run, and how much of it was done before.
fn submitted(h: &RunHandle, already_done: u32) -> Response<SubmitRunResponse> {
    Response::new(SubmitRunResponse {
        run_id: h.record.run_id.clone(),
        already_done,
        total: h.items.len() as u32,
    })
}

pub fn run_status(h: &RunHandle) -> RunStatus {
    let (state, error) = h.state();
    // Read, not written: results.json is written when the run ends.
    let set = h.rundir.result_set(&h.record.run_id, &h.items);
    let finished = set.tasks.len() as u32;
    let results = serde_json::to_string(&set).unwrap_or_default();
    RunStatus {
        run_id: h.record.run_id.clone(),
        state: state as i32,
        run_dir: h.rundir.root.display().to_string(),
        total: h.items.len() as u32,
        finished,
        errors: h.errors(),
        results_json: results,
        error: error.unwrap_or_default(),
    }
}

fn eval_status(e: EvalError) -> Status {
    match e {
        EvalError::Invalid(m) => Status::invalid_argument(m),
        EvalError::Precondition(m) => Status::failed_precondition(m),
        EvalError::Busy(m) => Status::resource_exhausted(m),
        EvalError::Deadline(m) => Status::deadline_exceeded(m),
        EvalError::Internal(m) => Status::internal(m),
    }
}

/// The call's own deadline (gRPC's `grpc-timeout` header: digits and a unit, H M S m u n).
pub fn grpc_timeout(meta: &tonic::metadata::MetadataMap) -> Option<std::time::Duration> {
    let v = meta.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    use std::time::Duration as D;
    Some(match unit {
        "H" => D::from_secs(n.saturating_mul(3600)),
        "M" => D::from_secs(n.saturating_mul(60)),
        "S" => D::from_secs(n),
        "m" => D::from_millis(n),
        "u" => D::from_micros(n),
        "n" => D::from_nanos(n),
        _ => return None,
    })
}

type EventStream = Pin<Box<dyn Stream<Item = Result<RunEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Runner for RunnerService {
    async fn submit_run(
        &self,
        req: Request<SubmitRunRequest>,
    ) -> Result<Response<SubmitRunResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let opt = |s: String| (!s.is_empty()).then(|| PathBuf::from(s));
        let mut paths = vec![
            ("image_lock", PathBuf::from(&r.image_lock), Access::Read),
            ("run_dir", PathBuf::from(&r.run_dir), Access::Write),
        ];
        if r.agent.contains('/') {
            paths.push(("agent", PathBuf::from(&r.agent), Access::Read));
        }
        if !r.hidden_set.is_empty() {
            paths.push(("hidden_set", PathBuf::from(&r.hidden_set), Access::Read));
        }
        let named: Vec<(&str, &std::path::Path, Access)> = paths
            .iter()
            .map(|(f, p, a)| (*f, p.as_path(), *a))
            .collect();
        self.engine
            .policy
            .check_paths(Some(&who), &named)
            .map_err(status_of)?;
        let (h, done) = self
            .engine
            .submit(
                RunRequest {
                    image_lock: PathBuf::from(r.image_lock),
                    tasks: r.tasks,
                    agent: r.agent,
                    runs: r.runs.max(1),
                    run_dir: PathBuf::from(r.run_dir),
                    hidden_set: opt(r.hidden_set),
                    memory: (r.memory_bytes > 0).then_some(r.memory_bytes),
                    perf_pairs: r.perf_pairs,
                    trusted_pairs: r.trusted_pairs,
                    checked_calls: r.checked_calls,
                    secrets: arena_run::Secrets::new(r.secrets.into_iter().collect(), "request")
                        .map_err(|e| Status::invalid_argument(e.to_string()))?,
                    probe: r.probe_unseen,
                },
                Some(who),
            )
            .await
            .map_err(status_of)?;
        Ok(submitted(&h, done))
    }

    async fn evaluate_unseen(
        &self,
        req: Request<EvaluateUnseenRequest>,
    ) -> Result<Response<SubmitRunResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        if r.hidden_set.is_empty() {
            return Err(Status::invalid_argument("hidden_set: required"));
        }
        let (run_dir, hidden) = (PathBuf::from(r.run_dir), PathBuf::from(r.hidden_set));
        self.engine
            .policy
            .check_paths(
                Some(&who),
                &[
                    ("run_dir", &run_dir, Access::Write),
                    ("hidden_set", &hidden, Access::Read),
                ],
            )
            .map_err(status_of)?;
        let (h, done) = self
            .engine
            .submit_unseen(&run_dir, &hidden, Some(who))
            .await
            .map_err(status_of)?;
        Ok(submitted(&h, done))
    }

    type WatchRunStream = EventStream;

    async fn watch_run(
        &self,
        req: Request<WatchRunRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let who = caller(&req)?;
        let h = self.handle(&req.into_inner().run_id, &who)?;
        let (history, mut live) = h.events.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        tokio::spawn(async move {
            for ev in history {
                let end = is_terminal(&ev);
                if tx.send(Ok(ev)).await.is_err() || end {
                    return;
                }
            }
            loop {
                match live.recv().await {
                    Ok(ev) => {
                        let end = is_terminal(&ev);
                        if tx.send(Ok(ev)).await.is_err() || end {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        let _ = tx
                            .send(Err(Status::data_loss(format!(
                                "watcher fell {n} events behind; watch again for the full history"
                            ))))
                            .await;
                        return;
                    }
                    Err(_) => return,
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn get_run(&self, req: Request<GetRunRequest>) -> Result<Response<RunStatus>, Status> {
        let who = caller(&req)?;
        let h = self.handle(&req.into_inner().run_id, &who)?;
        Ok(Response::new(run_status(&h)))
    }

    async fn cancel_run(
        &self,
        req: Request<CancelRunRequest>,
    ) -> Result<Response<RunStatus>, Status> {
        let who = caller(&req)?;
        let h = self.handle(&req.into_inner().run_id, &who)?;
        if h.state().0 == RunState::Running {
            h.cancel();
        }
        Ok(Response::new(run_status(&h)))
    }

    async fn evaluate(
        &self,
        req: Request<EvaluateRequest>,
    ) -> Result<Response<EvaluateResponse>, Status> {
        let who = caller(&req)?;
        let call_timeout = grpc_timeout(req.metadata());
        let r = req.into_inner();
        let lock = PathBuf::from(&r.image_lock);
        self.engine
            .policy
            .check_paths(Some(&who), &[("image_lock", &lock, Access::Read)])
            .map_err(status_of)?;
        let asked =
            (r.timeout_ms > 0).then(|| std::time::Duration::from_millis(r.timeout_ms.into()));
        let timeout = match (asked, call_timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let evaluator = self
            .engine
            .evaluator()
            .map_err(|e| Status::internal(format!("the Evaluate API's directory: {e}")))?;
        let reply = evaluator
            .evaluate(EvalRequest {
                image_lock: lock,
                task: r.task,
                files: r.files.into_iter().collect(),
                request_id: r.request_id.clone(),
                timeout,
                timing: RequestTiming {
                    pairs: r.trusted_pairs,
                    checked_calls: r.checked_calls,
                },
            })
            .await
            .map_err(eval_status)?;
        let result_json =
            serde_json::to_string(&reply.result).map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(EvaluateResponse {
            request_id: r.request_id,
            evaluation_id: reply.evaluation_id,
            result_json,
            queue_ms: reply.queue.as_secs_f64() * 1000.0,
            evaluate_ms: reply.evaluate.as_secs_f64() * 1000.0,
            warm: reply.warm,
        }))
    }

    async fn list_gpus(
        &self,
        req: Request<ListGpusRequest>,
    ) -> Result<Response<ListGpusResponse>, Status> {
        caller(&req)?;
        let pool = &self.engine.pool;
        let gpus = pool
            .gpus()
            .iter()
            .map(|g| Gpu {
                index: g.index,
                kind: g.kind.clone(),
                devices: g.devices.clone(),
                busy_with: pool.busy_with(g.index).unwrap_or_default(),
            })
            .collect();
        Ok(Response::new(ListGpusResponse { gpus }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_calls_grpc_timeout_is_read_in_each_unit_and_nonsense_is_none() {
        let t = |v: &str| {
            let mut m = tonic::metadata::MetadataMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&m)
        };
        assert_eq!(t("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(t("3M"), Some(Duration::from_secs(180)));
        assert_eq!(t("5S"), Some(Duration::from_secs(5)));
        assert_eq!(t("250m"), Some(Duration::from_millis(250)));
        assert_eq!(t("7u"), Some(Duration::from_micros(7)));
        assert_eq!(t("9n"), Some(Duration::from_nanos(9)));
        assert_eq!(t("5x"), None);
        assert_eq!(t("m"), None);
        assert_eq!(grpc_timeout(&tonic::metadata::MetadataMap::new()), None);
    }
}
