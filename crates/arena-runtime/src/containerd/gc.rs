//! Listing and removing what arena made in containerd: containers (with their labels),
//! active snapshots and leases labelled as arena's in its namespace. Images (and the layers
//! they hold) are never touched: they are what the lockfile pins. Which leftovers go is
//! decided above the boundary (`crate::cleanup`).

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::leases_client::LeasesClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::ListSnapshotsRequest;
use containerd_client::services::v1::{ListContainersRequest, ListRequest};
use tokio_stream::StreamExt;

use super::delete::{delete_container, delete_task, remove_snapshot};
use super::{lease, Containerd};
use crate::boundary::{Leftovers, MANAGED_LABEL};
use crate::error::{call, Result, RuntimeError};

fn filter() -> Vec<String> {
    vec![format!("labels.\"{MANAGED_LABEL}\"==true")]
}

/// What arena left in containerd (containers, active snapshots, leases).
pub(crate) async fn leftovers(c: &Containerd) -> Result<Leftovers> {
    let mut out = Leftovers::default();
    let mut cc = ContainersClient::new(c.channel());
    let list = call(
        cc.list(c.req(ListContainersRequest { filters: filter() }, None))
            .await,
        "containers.List",
        &c.namespace,
    )?;
    for x in list.containers {
        out.labels.insert(x.id.clone(), x.labels);
        out.containers.push(x.id);
    }
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
    for l in leases.leases {
        out.labels.insert(l.id.clone(), l.labels);
        out.leases.push(l.id);
    }
    out.containers.sort();
    out.snapshots.sort();
    out.leases.sort();
    Ok(out)
}

/// Removes what `found` lists: tasks (killed first), containers, snapshots, leases.
pub(crate) async fn remove(c: &Containerd, found: &Leftovers) -> Result<()> {
    let skip_absent = |r: Result<()>| match r {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    };
    for id in &found.containers {
        delete_task(c, id).await?;
        let id2 = id.clone();
        tokio::task::spawn_blocking(move || crate::egress::detach(&id2))
            .await
            .unwrap_or(Ok(()))?;
        skip_absent(delete_container(c, id).await)?;
    }
    // Addresses held on the egress network by containers whose process is gone (a runner
    // killed between the two). Not every attachment this containerd does not list: another
    // runner's agents (another containerd, or namespace) share the host's attachments, and
    // detaching one would leave it on the network without its allowlist.
    let live = leftovers(c).await?.containers;
    let stale: Vec<String> = tokio::task::spawn_blocking(crate::egress::orphaned)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|id| !live.contains(id))
        .collect();
    for id in stale {
        tokio::task::spawn_blocking(move || crate::egress::detach(&id))
            .await
            .unwrap_or(Ok(()))?;
    }
    for key in &found.snapshots {
        skip_absent(remove_snapshot(c, key).await)?;
    }
    for id in &found.leases {
        skip_absent(lease::delete(c, id).await)?;
    }
    Ok(())
}
