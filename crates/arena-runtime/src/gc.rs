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
    remove(c, leftovers(c).await?).await
}

/// What arena left whose container id (= snapshot key, lease `arena-run-<id>`) starts with
/// `prefix`: the leftovers of one run, which a resumed runner removes without touching other
/// runs sharing the namespace.
pub async fn leftovers_with_prefix(c: &Containerd, prefix: &str) -> Result<Leftovers> {
    let mut found = leftovers(c).await?;
    let lease_prefix = format!("arena-run-{prefix}");
    found.containers.retain(|id| id.starts_with(prefix));
    found.snapshots.retain(|k| k.starts_with(prefix));
    found.leases.retain(|l| l.starts_with(&lease_prefix));
    Ok(found)
}

/// Removes what arena left whose container id (= snapshot key; lease `arena-run-<id>`)
/// satisfies `keep`: the leftovers of one task run among the runs sharing a node.
pub async fn gc_where(c: &Containerd, keep: impl Fn(&str) -> bool) -> Result<Leftovers> {
    let mut found = leftovers(c).await?;
    found.containers.retain(|id| keep(id));
    found.snapshots.retain(|k| keep(k));
    found
        .leases
        .retain(|l| l.strip_prefix("arena-run-").is_some_and(&keep));
    remove(c, found).await
}

/// Removes the leftovers of containers whose id starts with `prefix`.
pub async fn gc_prefix(c: &Containerd, prefix: &str) -> Result<Leftovers> {
    remove(c, leftovers_with_prefix(c, prefix).await?).await
}

/// Prefix of the short-lived lease an image import holds: `arena-import-<pid>-<n>-<manifest>`.
pub const IMPORT_LEASE_PREFIX: &str = "arena-import-";

/// The process that created an import lease, read from the lease id.
pub fn import_lease_owner(id: &str) -> Option<u32> {
    let rest = id.strip_prefix(IMPORT_LEASE_PREFIX)?;
    rest.split_once('-')?.0.parse().ok()
}

/// Removes import leases whose process is gone (a runner killed while importing or
/// verifying an image). Leases of live processes are left alone: they may be importing now.
/// containerd expires such a lease on its own after an hour; this makes a restarted runner
/// leave nothing behind at once.
pub async fn gc_orphaned_imports(c: &Containerd) -> Result<Vec<String>> {
    let mut found = leftovers(c).await?;
    found.containers.clear();
    found.snapshots.clear();
    found.leases.retain(|id| match import_lease_owner(id) {
        Some(pid) => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        None => false,
    });
    Ok(remove(c, found).await?.leases)
}

async fn remove(c: &Containerd, found: Leftovers) -> Result<Leftovers> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_lease_owner_reads_the_pid_suffix() {
        assert_eq!(
            import_lease_owner("arena-import-22784-3-ceb3c14ab870"),
            Some(22784)
        );
        assert_eq!(import_lease_owner("arena-run-abc-1"), None);
        assert_eq!(import_lease_owner("arena-import-x-1-ceb3c14ab870"), None);
        assert_eq!(import_lease_owner("arena-import-"), None);
    }
}
