//! `delete`: removes task (killing what still runs), container, snapshot and lease — each
//! step tried, the first failure reported — then waits for the output FIFOs to drain.

use std::time::Duration;

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::RemoveSnapshotRequest;
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::{DeleteContainerRequest, DeleteTaskRequest, WaitRequest};

use super::create::Created;
use super::{lease, Containerd};
use crate::boundary::{LogStats, RUN_LEASE_PREFIX};
use crate::error::{call, Result, RuntimeError};

pub(crate) async fn delete(c: &Containerd, id: &str) -> Result<LogStats> {
    let known = c
        .created
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(id);
    // A container this process did not create (a leftover): try every step.
    let known_leftover = known.is_none();
    let mut created = known.unwrap_or_else(|| Created {
        lease: Some(format!("{RUN_LEASE_PREFIX}{id}")),
        snapshot: true,
        container: true,
        task: true,
        ..Default::default()
    });
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
    if created.egress || known_leftover {
        let id2 = id.to_string();
        keep(
            tokio::task::spawn_blocking(move || crate::egress::detach(&id2))
                .await
                .unwrap_or(Ok(())),
        );
    }
    if created.container {
        keep(delete_container(c, id).await);
    }
    if created.snapshot {
        keep(remove_snapshot(c, id).await);
    }
    if let Some(l) = &created.lease {
        keep(lease::delete(c, l).await);
    }
    // Draining waits for the shim to close its end: blocking work, off the async workers.
    let (out, err) = (created.stdout.take(), created.stderr.take());
    let fifo_dir = created.fifo_dir.take();
    let stats = tokio::task::spawn_blocking(move || {
        let stats = LogStats {
            stdout: out.map(|c| c.finish()).unwrap_or_default(),
            stderr: err.map(|c| c.finish()).unwrap_or_default(),
        };
        drop(fifo_dir);
        stats
    })
    .await
    .unwrap_or_default();
    first.map_or(Ok(stats), Err)
}

/// SIGKILL to every process, then wait (bounded) for the task to stop.
async fn kill_and_wait(c: &Containerd, id: &str) -> Result<()> {
    super::kill::kill(c, id, 9).await?;
    let mut tc = TasksClient::new(c.channel());
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

/// Deletes a task, killing it first if it still runs.
pub(crate) async fn delete_task(c: &Containerd, id: &str) -> Result<()> {
    let mut tc = TasksClient::new(c.channel());
    let req = || {
        c.req(
            DeleteTaskRequest {
                container_id: id.to_string(),
            },
            None,
        )
    };
    match tc.delete(req()).await {
        Ok(_) => Ok(()),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(()),
        // Still running. Depending on the containerd version the shim says so with
        // FailedPrecondition or with an Unknown "cannot delete a running process".
        Err(s) if still_running(&s) => {
            kill_and_wait(c, id).await?;
            // Wait can return before the shim has reaped every process: retry briefly.
            let mut last = None;
            for attempt in 0..20u64 {
                match tc.delete(req()).await {
                    Ok(_) => return Ok(()),
                    Err(s) if s.code() == tonic::Code::NotFound => return Ok(()),
                    Err(s) if still_running(&s) => {
                        last = Some(s);
                        if attempt % 5 == 4 {
                            super::kill::kill(c, id, 9).await?;
                        }
                        tokio::time::sleep(Duration::from_millis(100 + 50 * attempt)).await;
                    }
                    Err(s) => return Err(refused(id, s)),
                }
            }
            Err(refused(id, last.expect("a delete was refused")))
        }
        Err(s) => Err(refused(id, s)),
    }
}

fn refused(id: &str, s: tonic::Status) -> RuntimeError {
    RuntimeError::Containerd {
        call: "tasks.Delete",
        what: id.to_string(),
        status: Box::new(s),
    }
}

fn still_running(s: &tonic::Status) -> bool {
    s.code() == tonic::Code::FailedPrecondition
        || (s.code() == tonic::Code::Unknown && s.message().contains("running"))
}

pub(crate) async fn delete_container(c: &Containerd, id: &str) -> Result<()> {
    let mut cc = ContainersClient::new(c.channel());
    call(
        cc.delete(c.req(DeleteContainerRequest { id: id.to_string() }, None))
            .await,
        "containers.Delete",
        id,
    )
    .map(|_| ())
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
