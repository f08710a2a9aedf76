//! `arenactl gc`: removes what arena created and a crashed process left behind — tasks,
//! containers, snapshots and leases labelled as arena's in its namespace. Images (and the
//! layers they hold) are kept: they are what the lockfile pins.

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::leases_client::LeasesClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::ListSnapshotsRequest;
use containerd_client::services::v1::{DeleteContainerRequest, ListContainersRequest, ListRequest};
use serde::Serialize;
use tokio_stream::StreamExt;

use crate::client::{Containerd, MANAGED_LABEL};
use crate::error::{call, Result, RuntimeError};
use crate::lease;
use crate::run::{delete_task, remove_snapshot};

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Leftovers {
    pub containers: Vec<String>,
    pub snapshots: Vec<String>,
    pub leases: Vec<String>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.snapshots.is_empty() && self.leases.is_empty()
    }
}

fn filter() -> Vec<String> {
    vec![format!("labels.\"{MANAGED_LABEL}\"==true")]
}

/// What arena left in containerd (containers, active snapshots, leases).
pub async fn leftovers(c: &Containerd) -> Result<Leftovers> {
    let mut out = Leftovers::default();
    let mut cc = ContainersClient::new(c.channel());
    let list = call(
        cc.list(c.req(ListContainersRequest { filters: filter() }, None))
            .await,
        "containers.List",
        &c.namespace,
    )?;
    out.containers = list.containers.into_iter().map(|x| x.id).collect();
    let mut sc = SnapshotsClient::new(c.channel());
    let mut stream = call(
        sc.list(c.req(
            ListSnapshotsRequest {
                snapshotter: c.snapshotter.clone(),
                filters: filter(),
            },
            None,
        ))
        .await,
        "snapshots.List",
        &c.namespace,
    )?;
    while let Some(page) = stream.next().await {
        let page = page.map_err(|s| RuntimeError::Containerd {
            call: "snapshots.List",
            what: c.namespace.clone(),
            status: Box::new(s),
        })?;
        out.snapshots.extend(page.info.into_iter().map(|i| i.name));
    }
    let mut lc = LeasesClient::new(c.channel());
    let leases = call(
        lc.list(c.req(ListRequest { filters: filter() }, None))
            .await,
        "leases.List",
        &c.namespace,
    )?;
    out.leases = leases.leases.into_iter().map(|l| l.id).collect();
    out.containers.sort();
    out.snapshots.sort();
    out.leases.sort();
    Ok(out)
}

/// Removes every leftover; returns what was removed.
pub async fn gc(c: &Containerd) -> Result<Leftovers> {
    let found = leftovers(c).await?;
    for id in &found.containers {
        delete_task(c, id).await?;
        let mut cc = ContainersClient::new(c.channel());
        match cc
            .delete(c.req(DeleteContainerRequest { id: id.clone() }, None))
            .await
        {
            Ok(_) => {}
            Err(s) if s.code() == tonic::Code::NotFound => {}
            Err(s) => {
                return Err(RuntimeError::Containerd {
                    call: "containers.Delete",
                    what: id.clone(),
                    status: Box::new(s),
                })
            }
        }
    }
    for key in &found.snapshots {
        match remove_snapshot(c, key).await {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => {}
        }
    }
    for id in &found.leases {
        match lease::delete(c, id).await {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => {}
        }
    }
    Ok(found)
}
