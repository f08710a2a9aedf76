//! Cleanup of what arena left in a real containerd: `gc` removes the lease, snapshot and
//! container of a crashed run, and the import leases of dead processes go while live ones
//! stay. Each test starts a private containerd with the testbase image built by arena-image.
//! Needs root, containerd and runc (ci/setup.sh installs them).

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use arena_runtime::cleanup::gc;
use arena_runtime::ContainerRuntime;
use common::{assert_clean, setup};

#[tokio::test(flavor = "multi_thread")]
async fn gc_removes_what_a_crashed_process_left() {
    use containerd_client::services::v1::snapshots::{
        snapshots_client::SnapshotsClient, PrepareSnapshotRequest,
    };
    use containerd_client::services::v1::{
        containers_client::ContainersClient, Container, CreateContainerRequest,
    };
    let (_d, c, image, _t) = setup().await;
    // What a runner killed between "snapshot prepared, container created" and its teardown
    // leaves: a lease, a snapshot and a container, all labelled as arena's.
    let lease = arena_runtime::containerd::lease::create(
        &c,
        "arena-run-crashed",
        Duration::from_secs(3600),
        &HashMap::new(),
    )
    .await
    .unwrap();
    let labels: HashMap<String, String> =
        [("dev.arena.managed".to_string(), "true".to_string())].into();
    let mut req = tonic::Request::new(PrepareSnapshotRequest {
        snapshotter: "overlayfs".into(),
        key: "crashed".into(),
        parent: image.top_chain_id.to_string(),
        labels: labels.clone(),
    });
    req.metadata_mut()
        .insert("containerd-namespace", "arena-test".parse().unwrap());
    req.metadata_mut()
        .insert("containerd-lease", lease.parse().unwrap());
    SnapshotsClient::new(c.channel())
        .prepare(req)
        .await
        .unwrap();
    let mut req = tonic::Request::new(CreateContainerRequest {
        container: Some(Container {
            id: "crashed".into(),
            labels,
            image: image.name.clone(),
            runtime: Some(containerd_client::services::v1::container::Runtime {
                name: "io.containerd.runc.v2".into(),
                options: None,
            }),
            spec: Some(prost_types::Any {
                type_url: arena_runtime::containerd::SPEC_TYPE_URL.into(),
                value: b"{}".to_vec(),
            }),
            snapshotter: "overlayfs".into(),
            snapshot_key: "crashed".into(),
            ..Default::default()
        }),
    });
    req.metadata_mut()
        .insert("containerd-namespace", "arena-test".parse().unwrap());
    ContainersClient::new(c.channel())
        .create(req)
        .await
        .unwrap();
    let left = c.leftovers().await.unwrap();
    assert_eq!(left.containers, ["crashed"]);
    assert_eq!(left.snapshots, ["crashed"]);
    assert_eq!(left.leases, ["arena-run-crashed"]);
    // Nothing names an owner: the default policy (not --all) removes it all.
    let removed = gc(&c, false).await.unwrap();
    assert_eq!(
        (removed.containers, removed.snapshots, removed.leases),
        (left.containers, left.snapshots, left.leases)
    );
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn import_leases_of_dead_processes_are_removed_and_live_ones_kept() {
    let (_d, c, _image, _t) = setup().await;
    // A process that has exited: its pid is free (no /proc entry) once it is reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    assert!(!Path::new(&format!("/proc/{dead}")).exists());
    let orphan = format!("arena-import-{dead}-0-0123456789ab");
    let live = format!("arena-import-{}-0-0123456789ab", std::process::id());
    for id in [&orphan, &live] {
        arena_runtime::containerd::lease::create(
            &c,
            id,
            Duration::from_secs(3600),
            &HashMap::new(),
        )
        .await
        .unwrap();
    }
    let removed = arena_runtime::cleanup::gc_orphaned_imports(&c)
        .await
        .unwrap();
    assert_eq!(removed, [orphan]);
    assert_eq!(
        c.leftovers().await.unwrap().leases,
        std::slice::from_ref(&live)
    );
    arena_runtime::containerd::lease::delete(&c, &live)
        .await
        .unwrap();
    assert_clean(&c).await;
}
