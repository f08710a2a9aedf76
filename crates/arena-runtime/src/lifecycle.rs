//! One container from start to finish, on any [`ContainerRuntime`]: create, start, wait with
//! a wall-clock timeout and a cancel signal (either kills every process of the container),
//! and a delete that always runs — in a task of its own, so a caller that is cancelled or
//! errors leaves nothing behind.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tokio::sync::watch;

use crate::boundary::{
    ContainerRuntime, ContainerSpec, DEADLINE_LABEL, MANAGED_LABEL, OWNER_LABEL,
};
use crate::error::{Result, RuntimeError};
use crate::spec::ContainerConfig;
use crate::ImageRef;

/// How long a killed container may take to stop before teardown goes on regardless.
const KILL_GRACE: Duration = Duration::from_secs(30);

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
    /// Notified once the container's process has started (runc has started it): for those
    /// who must act while it runs (the crash tests' `during:` points), without guessing how
    /// long a start takes.
    pub on_started: Option<std::sync::Arc<tokio::sync::Notify>>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
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

/// `<pid>@<process start time in clock ticks>`: names this process so that a later process
/// can tell whether it still runs (a pid alone may have been reused).
pub fn owner_id() -> String {
    let pid = std::process::id();
    format!("{pid}@{}", start_ticks(pid).unwrap_or(0))
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks since boot.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the owner an [`owner_id`] names is still running.
pub fn owner_alive(owner: &str) -> bool {
    let Some((pid, ticks)) = owner.split_once('@') else {
        return false;
    };
    match (pid.parse::<u32>(), ticks.parse::<u64>()) {
        (Ok(pid), Ok(ticks)) => start_ticks(pid) == Some(ticks),
        _ => false,
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Runs a container to completion. The lifecycle runs in a spawned task: if the caller's
/// future is dropped, the container is still killed (on cancel or timeout) and torn down.
pub async fn run_container(rt: &Arc<dyn ContainerRuntime>, req: RunRequest) -> Result<RunOutcome> {
    let rt = rt.clone();
    tokio::spawn(tracing::Instrument::instrument(
        async move { lifecycle(rt.as_ref(), req).await },
        tracing::Span::current(),
    ))
    .await
    .map_err(|e| RuntimeError::invalid("container lifecycle", e.to_string()))?
}

enum Ending {
    Exited(u32),
    TimedOut,
    Cancelled,
}

async fn lifecycle(rt: &dyn ContainerRuntime, req: RunRequest) -> Result<RunOutcome> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&req.log_dir).map_err(|e| RuntimeError::io(&req.log_dir, e))?;
    let mut labels = req.labels.clone();
    labels.insert(MANAGED_LABEL.to_string(), "true".to_string());
    labels.insert(OWNER_LABEL.to_string(), owner_id());
    // The grace covers create, start and teardown: a container found running past it has
    // outlived every timeout of whoever started it.
    labels.insert(
        DEADLINE_LABEL.to_string(),
        (unix_now() + req.timeout.as_secs() + KILL_GRACE.as_secs() + 60).to_string(),
    );
    let spec = ContainerSpec {
        id: req.id.clone(),
        image: req.image.clone(),
        config: req.config.clone(),
        labels,
        stdout: req.log_dir.join(format!("{}.stdout.log", req.id)),
        stderr: req.log_dir.join(format!("{}.stderr.log", req.id)),
        log_cap: req.log_cap,
        lease_ttl: req.timeout + Duration::from_secs(3600),
    };
    let result = start_and_wait(rt, &spec, &req, t0).await;
    let t_teardown = Instant::now();
    let logs = rt.delete(&req.id).await;
    let teardown_s = t_teardown.elapsed().as_secs_f64();
    tracing::debug!(teardown_s, "container deleted");
    let (ending, create_s, start_s, run_s) = result?;
    let logs = logs?;
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
        stdout: spec.stdout,
        stderr: spec.stderr,
        stdout_bytes: logs.stdout.total,
        stderr_bytes: logs.stderr.total,
        stdout_truncated: logs.stdout.truncated(),
        stderr_truncated: logs.stderr.truncated(),
    })
}

async fn start_and_wait(
    rt: &dyn ContainerRuntime,
    spec: &ContainerSpec,
    req: &RunRequest,
    t0: Instant,
) -> Result<(Ending, f64, f64, f64)> {
    rt.create(spec).await?;
    let create_s = t0.elapsed().as_secs_f64();
    tracing::debug!(create_s, network = ?spec.config.network, "container created");
    let t_start = Instant::now();
    rt.start(&req.id).await?;
    let start_s = t_start.elapsed().as_secs_f64();
    tracing::debug!(
        start_s,
        timeout_s = req.timeout.as_secs(),
        "container started"
    );
    if let Some(n) = &req.on_started {
        n.notify_one();
    }
    let t_run = Instant::now();
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
        r = tokio::time::timeout(req.timeout, rt.wait(&req.id)) => match r {
            Ok(status) => Ending::Exited(status?),
            Err(_) => Ending::TimedOut,
        },
        _ = cancelled => Ending::Cancelled,
    };
    if !matches!(ending, Ending::Exited(_)) {
        tracing::info!(
            timed_out = matches!(ending, Ending::TimedOut),
            "killing the container"
        );
        rt.kill(&req.id, 9).await?;
        let _ = tokio::time::timeout(KILL_GRACE, rt.wait(&req.id)).await;
    }
    Ok((ending, create_s, start_s, t_run.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeRuntime;
    use arena_image::Digest;

    fn image() -> ImageRef {
        ImageRef {
            name: "img".into(),
            manifest: Digest::of_bytes(b"m"),
            top_chain_id: Digest::of_bytes(b"l"),
        }
    }

    fn req(id: &str, timeout_ms: u64, logs: &std::path::Path) -> RunRequest {
        RunRequest {
            id: id.into(),
            image: image(),
            config: ContainerConfig::command(&["prog"]),
            timeout: Duration::from_millis(timeout_ms),
            log_dir: logs.into(),
            log_cap: 8,
            labels: HashMap::new(),
            cancel: None,
            on_started: None,
        }
    }

    fn rt(f: &FakeRuntime) -> Arc<dyn ContainerRuntime> {
        Arc::new(f.clone())
    }

    #[tokio::test]
    async fn exit_code_logs_and_labels() {
        let f = FakeRuntime::new();
        f.program(
            |_| true,
            |p| async move {
                p.print("hello, world");
                3
            },
        );
        let d = tempfile::tempdir().unwrap();
        let out = run_container(&rt(&f), req("c1", 5000, d.path()))
            .await
            .unwrap();
        assert_eq!((out.exit_code, out.timed_out), (3, false));
        assert_eq!(std::fs::read_to_string(&out.stdout).unwrap(), "hello, w");
        assert!(out.stdout_truncated && out.stdout_bytes == 12);
        assert_eq!(f.calls(), ["create c1", "start c1", "wait c1", "delete c1"]);
        let spec = f.spec_of("c1").unwrap();
        assert_eq!(spec.labels[MANAGED_LABEL], "true");
        assert!(owner_alive(&spec.labels[OWNER_LABEL]));
        let deadline: u64 = spec.labels[DEADLINE_LABEL].parse().unwrap();
        assert!(deadline > unix_now() && deadline < unix_now() + 200);
        assert!(f.containers().is_empty());
    }

    #[tokio::test]
    async fn a_timeout_kills_and_still_deletes() {
        let f = FakeRuntime::new();
        f.program(
            |_| true,
            |_| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                0
            },
        );
        let d = tempfile::tempdir().unwrap();
        let out = run_container(&rt(&f), req("slow", 50, d.path()))
            .await
            .unwrap();
        assert!(out.timed_out && !out.cancelled);
        assert_eq!(out.exit_code, 137);
        let calls = f.calls();
        assert!(calls.contains(&"kill slow".to_string()), "{calls:?}");
        assert_eq!(calls.last().unwrap(), "delete slow");
    }

    #[tokio::test]
    async fn cancel_kills_and_deletes() {
        let f = FakeRuntime::new();
        f.program(
            |_| true,
            |_| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                0
            },
        );
        let d = tempfile::tempdir().unwrap();
        let (tx, rx) = watch::channel(false);
        let mut r = req("c", 60_000, d.path());
        r.cancel = Some(rx);
        let h = tokio::spawn({
            let rt = rt(&f);
            async move { run_container(&rt, r).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.send(true).unwrap();
        let out = h.await.unwrap().unwrap();
        assert!(out.cancelled && !out.timed_out);
        assert!(f.containers().is_empty());
    }

    #[tokio::test]
    async fn a_failed_start_is_reported_and_what_was_created_is_deleted() {
        let f = FakeRuntime::new();
        f.fail_next("start", "c", "shim died");
        let d = tempfile::tempdir().unwrap();
        let e = run_container(&rt(&f), req("c", 1000, d.path()))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("shim died"), "{e}");
        assert_eq!(f.calls(), ["create c", "start c", "delete c"]);
        assert!(f.containers().is_empty());
    }

    #[tokio::test]
    async fn a_failed_delete_is_an_error_even_after_a_clean_exit() {
        let f = FakeRuntime::new();
        f.fail_next("delete", "c", "containerd restarting");
        let d = tempfile::tempdir().unwrap();
        let e = run_container(&rt(&f), req("c", 1000, d.path()))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("containerd restarting"), "{e}");
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        let me = owner_id();
        assert!(owner_alive(&me), "{me}");
        let (pid, ticks) = me.split_once('@').unwrap();
        let other_start = format!("{pid}@{}", ticks.parse::<u64>().unwrap() + 1);
        assert!(!owner_alive(&other_start), "a reused pid is not the owner");
        assert!(!owner_alive("4194304@1"));
        assert!(!owner_alive("garbage"));
    }
}
