//! Which leftovers go: policies over [`ContainerRuntime::leftovers`]. A crashed process
//! leaves containers, snapshots and leases behind; `gc` removes those whose owner is gone or
//! whose deadline has passed (a container that outlived every timeout of whoever started
//! it), never those of a process that still runs them — unless asked to remove everything.

use std::time::SystemTime;

use crate::boundary::{
    ContainerRuntime, Leftovers, DEADLINE_LABEL, IMPORT_LEASE_PREFIX, OWNER_LABEL, RUN_LEASE_PREFIX,
};
use crate::error::Result;
use crate::lifecycle::owner_alive;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Whether a container (or lease) with these labels is abandoned at time `now`: its owner
/// is not running, it names no owner, or its deadline has passed.
pub fn abandoned(labels: Option<&std::collections::HashMap<String, String>>, now: u64) -> bool {
    let Some(l) = labels else { return true };
    let dead = l.get(OWNER_LABEL).is_none_or(|o| !owner_alive(o));
    let late = l
        .get(DEADLINE_LABEL)
        .and_then(|d| d.parse::<u64>().ok())
        .is_some_and(|d| d < now);
    dead || late
}

/// The process that created an import lease, read from the lease id
/// (`arena-import-<pid>-<n>-<manifest>`).
pub fn import_lease_owner(id: &str) -> Option<u32> {
    let rest = id.strip_prefix(IMPORT_LEASE_PREFIX)?;
    rest.split_once('-')?.0.parse().ok()
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// What of `found` is abandoned: containers by their labels, the snapshot and lease of each
/// such container, snapshots and run leases that belong to no live container, and import
/// leases of dead processes.
pub fn abandoned_part(found: Leftovers, now: u64) -> Leftovers {
    let live: std::collections::BTreeSet<String> = found
        .containers
        .iter()
        .filter(|id| !abandoned(found.labels.get(*id), now))
        .cloned()
        .collect();
    // A run lease whose container is not listed may belong to a container being created
    // right now: it is judged by its own labels.
    let lease_live = |l: &str| {
        l.strip_prefix(RUN_LEASE_PREFIX)
            .is_some_and(|id| live.contains(id))
            || (!found
                .containers
                .iter()
                .any(|c| l == format!("{RUN_LEASE_PREFIX}{c}"))
                && l.starts_with(RUN_LEASE_PREFIX)
                && !abandoned(found.labels.get(l), now))
    };
    let containers = found
        .containers
        .iter()
        .filter(|id| !live.contains(*id))
        .cloned()
        .collect();
    let leases = found
        .leases
        .iter()
        .filter(|l| match import_lease_owner(l) {
            Some(pid) => !pid_alive(pid),
            None => !lease_live(l),
        })
        .cloned()
        .collect();
    let snapshots = found
        .snapshots
        .iter()
        .filter(|k| !live.contains(*k) && !lease_live(&format!("{RUN_LEASE_PREFIX}{k}")))
        .cloned()
        .collect();
    Leftovers {
        containers,
        snapshots,
        leases,
        labels: Default::default(),
    }
}

/// `arenactl gc`: removes what crashed processes left (or, with `all`, everything arena
/// holds in the namespace); returns what was removed.
pub async fn gc(rt: &dyn ContainerRuntime, all: bool) -> Result<Leftovers> {
    let found = rt.leftovers().await?;
    let doomed = if all {
        found
    } else {
        abandoned_part(found, now())
    };
    rt.remove(&doomed).await?;
    Ok(doomed)
}

/// Removes what arena holds for containers whose id satisfies `keep` (snapshot keys are
/// container ids; container leases are `arena-run-<id>`): the leftovers of one run or task
/// run, which its owner removes without touching other runs sharing the namespace.
pub async fn gc_where(rt: &dyn ContainerRuntime, keep: impl Fn(&str) -> bool) -> Result<Leftovers> {
    let found = rt.leftovers().await?.only(keep);
    rt.remove(&found).await?;
    Ok(found)
}

/// Removes the leftovers of containers whose id starts with `prefix`.
pub async fn gc_prefix(rt: &dyn ContainerRuntime, prefix: &str) -> Result<Leftovers> {
    gc_where(rt, |id| id.starts_with(prefix)).await
}

/// Removes import leases whose process is gone (a runner killed while importing or
/// verifying an image). Leases of live processes are left alone: they may be importing now.
pub async fn gc_orphaned_imports(rt: &dyn ContainerRuntime) -> Result<Vec<String>> {
    let found = rt.leftovers().await?;
    let doomed = Leftovers {
        leases: found
            .leases
            .into_iter()
            .filter(|id| import_lease_owner(id).is_some_and(|pid| !pid_alive(pid)))
            .collect(),
        ..Default::default()
    };
    rt.remove(&doomed).await?;
    Ok(doomed.leases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn labels(owner: &str, deadline: u64) -> HashMap<String, String> {
        HashMap::from([
            (OWNER_LABEL.to_string(), owner.to_string()),
            (DEADLINE_LABEL.to_string(), deadline.to_string()),
        ])
    }

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

    #[test]
    fn a_container_is_abandoned_when_its_owner_is_gone_or_it_is_late() {
        let me = crate::lifecycle::owner_id();
        assert!(!abandoned(Some(&labels(&me, 2000)), 1000));
        assert!(
            abandoned(Some(&labels(&me, 999)), 1000),
            "past its deadline"
        );
        assert!(
            abandoned(Some(&labels("4194304@7", 2000)), 1000),
            "dead owner"
        );
        assert!(abandoned(Some(&HashMap::new()), 1000), "no owner");
        assert!(abandoned(None, 1000));
    }

    #[test]
    fn only_the_abandoned_part_goes_with_its_snapshot_and_lease() {
        let me = crate::lifecycle::owner_id();
        let found = Leftovers {
            containers: vec!["live".into(), "dead".into()],
            snapshots: vec![
                "live".into(),
                "dead".into(),
                "orphan".into(),
                "creating".into(),
            ],
            leases: vec![
                "arena-run-live".into(),
                "arena-run-dead".into(),
                "arena-run-creating".into(),
                format!("arena-import-{}-1-abc", std::process::id()),
                "arena-import-4194304-1-abc".into(),
            ],
            labels: [
                ("live".to_string(), labels(&me, u64::MAX)),
                ("dead".to_string(), labels("4194304@7", u64::MAX)),
                ("arena-run-creating".to_string(), labels(&me, u64::MAX)),
            ]
            .into(),
        };
        let gone = abandoned_part(found, 1000);
        assert_eq!(gone.containers, ["dead"]);
        assert_eq!(gone.snapshots, ["dead", "orphan"]);
        assert_eq!(
            gone.leases,
            ["arena-run-dead", "arena-import-4194304-1-abc"]
        );
    }
}
