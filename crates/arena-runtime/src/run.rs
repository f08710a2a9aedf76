//! One container from start to finish: a fresh snapshot on the image, the container and its
//! task, stdout/stderr captured with a cap, a wall-clock timeout that kills every process of
//! the container, and a teardown (task, container, snapshot, lease) that always runs — in a
//! task of its own, so a caller that is cancelled or errors leaves nothing behind.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use containerd_client::services::v1::container::Runtime;
use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::{PrepareSnapshotRequest, RemoveSnapshotRequest};
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::{
    Container, CreateContainerRequest, CreateTaskRequest, DeleteContainerRequest,
    DeleteTaskRequest, KillRequest, StartRequest, WaitRequest,
};
use serde::Serialize;
use tokio::sync::watch;

use crate::client::{Containerd, MANAGED_LABEL};
use crate::error::{call, Result, RuntimeError};
use crate::import::ImageRef;
use crate::lease;
use crate::logs::Capture;
use crate::spec::{build_spec, ContainerConfig};

pub const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";
pub const RUNC: &str = "io.containerd.runc.v2";

pub struct RunRequest {
    /// Container id (also the snapshot key and the lease's suffix).
    pub id: String,
    pub image: ImageRef,
    pub config: ContainerConfig,
    pub timeout: Duration,
    /// Where `<id>.stdout.log` and `<id>.stderr.log` go.
    pub log_dir: PathBuf,
    /// Bytes kept of each stream.
    pub log_cap: u64,
    pub labels: HashMap<String, String>,
    /// Set to true to kill the container early (Ctrl-C).
    pub cancel: Option<watch::Receiver<bool>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Durations {
    pub create_s: f64,
    pub start_s: f64,
    pub run_s: f64,
    pub teardown_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    pub id: String,
    /// The process's exit status (128 + signal when killed).
    pub exit_code: u32,
    pub timed_out: bool,
    pub cancelled: bool,
    pub durations: Durations,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

/// Runs a container to completion. The lifecycle runs in a spawned task: if the caller's
/// future is dropped, the container is still killed (on cancel or timeout) and torn down.
pub async fn run_container(c: &Containerd, req: RunRequest) -> Result<RunOutcome> {
    let c = c.clone();
    tokio::spawn(async move { lifecycle(&c, req).await })
        .await
        .map_err(|e| RuntimeError::invalid("container lifecycle", e.to_string()))?
}

enum Ending {
    Exited(u32),
    TimedOut,
    Cancelled,
}

async fn lifecycle(c: &Containerd, req: RunRequest) -> Result<RunOutcome> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&req.log_dir).map_err(|e| RuntimeError::io(&req.log_dir, e))?;
    let stdout = req.log_dir.join(format!("{}.stdout.log", req.id));
    let stderr = req.log_dir.join(format!("{}.stderr.log", req.id));
    let lease_id = lease::create(
        c,
        &format!("arena-run-{}", req.id),
        req.timeout + Duration::from_secs(3600),
    )
    .await?;
    let lease = lease_id.as_str();

    let fifo_dir = tempfile::Builder::new()
        .prefix("arena-io-")
        .tempdir()
        .map_err(|e| RuntimeError::io(std::env::temp_dir(), e))?;
    let out_cap = Capture::start(fifo_dir.path().join("stdout"), stdout.clone(), req.log_cap)?;
    let err_cap = Capture::start(fifo_dir.path().join("stderr"), stderr.clone(), req.log_cap)?;

    let mut created = Created::default();
    let result = start_and_wait(c, &req, lease, &out_cap, &err_cap, &mut created, t0).await;
    let t_teardown = Instant::now();
    let teardown = teardown(c, &req.id, lease, &created).await;
    let out = out_cap.finish();
    let err = err_cap.finish();
    let teardown_s = t_teardown.elapsed().as_secs_f64();
    let (ending, create_s, start_s, run_s) = result?;
    teardown?;
    let (exit_code, timed_out, cancelled) = match ending {
        Ending::Exited(code) => (code, false, false),
        Ending::TimedOut => (137, true, false),
        Ending::Cancelled => (137, false, true),
    };
    Ok(RunOutcome {
        id: req.id.clone(),
        exit_code,
        timed_out,
        cancelled,
        durations: Durations {
            create_s,
            start_s,
            run_s,
            teardown_s,
        },
        stdout,
        stderr,
        stdout_bytes: out.total,
        stderr_bytes: err.total,
        stdout_truncated: out.truncated(),
        stderr_truncated: err.truncated(),
    })
}

/// What exists and must be removed.
#[derive(Default)]
struct Created {
    snapshot: bool,
    container: bool,
    task: bool,
}

async fn start_and_wait(
    c: &Containerd,
    req: &RunRequest,
    lease: &str,
    out: &Capture,
    err: &Capture,
    created: &mut Created,
    t0: Instant,
) -> Result<(Ending, f64, f64, f64)> {
    let spec = build_spec(&req.config)?;
    let spec_json = serde_json::to_vec(&spec)
        .map_err(|e| RuntimeError::invalid("runtime spec", e.to_string()))?;
    let mut labels = req.labels.clone();
    labels.insert(MANAGED_LABEL.to_string(), "true".to_string());

    let mut sc = SnapshotsClient::new(c.channel());
    let prepared = call(
        sc.prepare(c.req(
            PrepareSnapshotRequest {
                snapshotter: c.snapshotter.clone(),
                key: req.id.clone(),
                parent: req.image.top_chain_id.to_string(),
                labels: labels.clone(),
            },
            Some(lease),
        ))
        .await,
        "snapshots.Prepare",
        &req.id,
    )?;
    created.snapshot = true;

    let mut cc = ContainersClient::new(c.channel());
    call(
        cc.create(c.req(
            CreateContainerRequest {
                container: Some(Container {
                    id: req.id.clone(),
                    labels: labels.clone(),
                    image: req.image.name.clone(),
                    runtime: Some(Runtime {
                        name: RUNC.to_string(),
                        options: None,
                    }),
                    spec: Some(prost_types::Any {
                        type_url: SPEC_TYPE_URL.to_string(),
                        value: spec_json,
                    }),
                    snapshotter: c.snapshotter.clone(),
                    snapshot_key: req.id.clone(),
                    ..Default::default()
                }),
            },
            Some(lease),
        ))
        .await,
        "containers.Create",
        &req.id,
    )?;
    created.container = true;

    let mut tc = TasksClient::new(c.channel());
    call(
        tc.create(c.req(
            CreateTaskRequest {
                container_id: req.id.clone(),
                rootfs: prepared.mounts,
                stdout: out.fifo().display().to_string(),
                stderr: err.fifo().display().to_string(),
                ..Default::default()
            },
            Some(lease),
        ))
        .await,
        "tasks.Create",
        &req.id,
    )?;
    created.task = true;
    let create_s = t0.elapsed().as_secs_f64();

    let t_start = Instant::now();
    call(
        tc.start(c.req(
            StartRequest {
                container_id: req.id.clone(),
                ..Default::default()
            },
            Some(lease),
        ))
        .await,
        "tasks.Start",
        &req.id,
    )?;
    let start_s = t_start.elapsed().as_secs_f64();

    let t_run = Instant::now();
    let wait = async {
        call(
            TasksClient::new(c.channel())
                .wait(c.req(
                    WaitRequest {
                        container_id: req.id.clone(),
                        ..Default::default()
                    },
                    None,
                ))
                .await,
            "tasks.Wait",
            &req.id,
        )
    };
    let cancelled = async {
        match req.cancel.clone() {
            Some(mut rx) => {
                while !*rx.borrow() {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            }
            None => std::future::pending::<()>().await,
        }
    };
    let ending = tokio::select! {
        r = tokio::time::timeout(req.timeout, wait) => match r {
            Ok(status) => Ending::Exited(status?.exit_status),
            Err(_) => Ending::TimedOut,
        },
        _ = cancelled => Ending::Cancelled,
    };
    if !matches!(ending, Ending::Exited(_)) {
        kill_all(c, &req.id).await?;
    }
    Ok((ending, create_s, start_s, t_run.elapsed().as_secs_f64()))
}

/// SIGKILL to every process of the container, then wait for the task to stop.
async fn kill_all(c: &Containerd, id: &str) -> Result<()> {
    let mut tc = TasksClient::new(c.channel());
    call(
        tc.kill(c.req(
            KillRequest {
                container_id: id.to_string(),
                signal: 9,
                all: true,
                ..Default::default()
            },
            None,
        ))
        .await,
        "tasks.Kill",
        id,
    )?;
    let _ = tokio::time::timeout(
        Duration::from_secs(30),
        tc.wait(c.req(
            WaitRequest {
                container_id: id.to_string(),
                ..Default::default()
            },
            None,
        )),
    )
    .await;
    Ok(())
}

/// Removes task, container, snapshot and lease; tries every step, reports the first failure.
async fn teardown(c: &Containerd, id: &str, lease: &str, created: &Created) -> Result<()> {
    let mut first: Option<RuntimeError> = None;
    let mut keep = |r: Result<()>| {
        if let Err(e) = r {
            if !e.is_not_found() && first.is_none() {
                first = Some(e);
            }
        }
    };
    if created.task {
        keep(delete_task(c, id).await);
    }
    if created.container {
        let mut cc = ContainersClient::new(c.channel());
        keep(
            call(
                cc.delete(c.req(DeleteContainerRequest { id: id.to_string() }, None))
                    .await,
                "containers.Delete",
                id,
            )
            .map(|_| ()),
        );
    }
    if created.snapshot {
        keep(remove_snapshot(c, id).await);
    }
    keep(lease::delete(c, lease).await);
    first.map_or(Ok(()), Err)
}

/// Deletes a task, killing it first if it still runs.
pub(crate) async fn delete_task(c: &Containerd, id: &str) -> Result<()> {
    let mut tc = TasksClient::new(c.channel());
    let del = tc
        .delete(c.req(
            DeleteTaskRequest {
                container_id: id.to_string(),
            },
            None,
        ))
        .await;
    match del {
        Ok(_) => Ok(()),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(()),
        Err(s) if s.code() == tonic::Code::FailedPrecondition => {
            // Still running: kill everything, then delete.
            kill_all(c, id).await?;
            call(
                tc.delete(c.req(
                    DeleteTaskRequest {
                        container_id: id.to_string(),
                    },
                    None,
                ))
                .await,
                "tasks.Delete",
                id,
            )
            .map(|_| ())
        }
        Err(s) => Err(RuntimeError::Containerd {
            call: "tasks.Delete",
            what: id.to_string(),
            status: Box::new(s),
        }),
    }
}

pub(crate) async fn remove_snapshot(c: &Containerd, key: &str) -> Result<()> {
    let mut sc = SnapshotsClient::new(c.channel());
    call(
        sc.remove(c.req(
            RemoveSnapshotRequest {
                snapshotter: c.snapshotter.clone(),
                key: key.to_string(),
            },
            None,
        ))
        .await,
        "snapshots.Remove",
        key,
    )
    .map(|_| ())
}
