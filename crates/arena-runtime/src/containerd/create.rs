//! `create`: a lease for everything the container holds, FIFOs for its output (read into
//! capped log files), a fresh snapshot on the image's top layer, the container record with
//! its runtime spec, and the task (created, not started). Each step is recorded as it is
//! made, so that `delete` removes exactly what exists, also after a failure half-way.

use std::time::Duration;

use containerd_client::services::v1::container::Runtime;
use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::PrepareSnapshotRequest;
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::{Container, CreateContainerRequest, CreateTaskRequest};

use super::logs::Capture;
use super::{lease, Containerd, RUNC, SPEC_TYPE_URL};
use crate::boundary::{ContainerSpec, RUN_LEASE_PREFIX};
use crate::egress;
use crate::error::{call, Result, RuntimeError};
use crate::gpu::BindMount;
use crate::spec::{build_spec, Network};

/// What exists for a container and must be removed.
#[derive(Default)]
pub(crate) struct Created {
    pub lease: Option<String>,
    pub snapshot: bool,
    pub container: bool,
    pub task: bool,
    pub stdout: Option<Capture>,
    pub stderr: Option<Capture>,
    /// Holds the FIFOs; removed with the container.
    pub fifo_dir: Option<tempfile::TempDir>,
    /// Attached to the egress network (detached on delete).
    pub egress: bool,
}

/// Runs `f` on the container's record of what exists.
fn note(c: &Containerd, id: &str, f: impl FnOnce(&mut Created)) {
    let mut all = c.created.lock().unwrap_or_else(|e| e.into_inner());
    f(all.entry(id.to_string()).or_default());
}

pub(crate) async fn create(c: &Containerd, s: &ContainerSpec) -> Result<()> {
    if c.created
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains_key(&s.id)
    {
        return Err(RuntimeError::invalid(
            format!("container {}", s.id),
            "created twice by this process",
        ));
    }
    note(c, &s.id, |_| {});
    let mut config = s.config.clone();
    if matches!(config.network, Network::Egress { .. }) {
        // The host's resolvers, as the namespace can reach them.
        if let Some(f) = egress::resolv_conf_file()? {
            config.binds.push(BindMount {
                source: f,
                destination: "/etc/resolv.conf".into(),
                readonly: true,
            });
        }
    }
    // The spec first: a config that cannot be expressed fails before anything exists.
    let spec = build_spec(&config)?;
    let spec_json = serde_json::to_vec(&spec)
        .map_err(|e| RuntimeError::invalid("runtime spec", e.to_string()))?;
    let lease = lease::create(
        c,
        &format!("{RUN_LEASE_PREFIX}{}", s.id),
        s.lease_ttl.max(Duration::from_secs(60)),
        &s.labels,
    )
    .await?;
    note(c, &s.id, |x| x.lease = Some(lease.clone()));

    let fifo_dir = tempfile::Builder::new()
        .prefix("arena-io-")
        .tempdir()
        .map_err(|e| RuntimeError::io(std::env::temp_dir(), e))?;
    let out = Capture::start(fifo_dir.path().join("stdout"), s.stdout.clone(), s.log_cap)?;
    let out_fifo = out.fifo().display().to_string();
    note(c, &s.id, |x| x.stdout = Some(out));
    let err = Capture::start(fifo_dir.path().join("stderr"), s.stderr.clone(), s.log_cap)?;
    let err_fifo = err.fifo().display().to_string();
    note(c, &s.id, |x| {
        x.stderr = Some(err);
        x.fifo_dir = Some(fifo_dir);
    });

    let mut sc = SnapshotsClient::new(c.channel());
    let prepared = call(
        sc.prepare(c.req(
            PrepareSnapshotRequest {
                snapshotter: c.snapshotter.clone(),
                key: s.id.clone(),
                parent: s.image.top_chain_id.to_string(),
                labels: s.labels.clone(),
            },
            Some(&lease),
        ))
        .await,
        "snapshots.Prepare",
        &s.id,
    )?;
    note(c, &s.id, |x| x.snapshot = true);

    let mut cc = ContainersClient::new(c.channel());
    call(
        cc.create(c.req(
            CreateContainerRequest {
                container: Some(Container {
                    id: s.id.clone(),
                    labels: s.labels.clone(),
                    image: s.image.name.clone(),
                    runtime: Some(Runtime {
                        name: RUNC.to_string(),
                        options: None,
                    }),
                    spec: Some(prost_types::Any {
                        type_url: SPEC_TYPE_URL.to_string(),
                        value: spec_json,
                    }),
                    snapshotter: c.snapshotter.clone(),
                    snapshot_key: s.id.clone(),
                    ..Default::default()
                }),
            },
            Some(&lease),
        ))
        .await,
        "containers.Create",
        &s.id,
    )?;
    note(c, &s.id, |x| x.container = true);

    let mut tc = TasksClient::new(c.channel());
    let task = call(
        tc.create(c.req(
            CreateTaskRequest {
                container_id: s.id.clone(),
                rootfs: prepared.mounts,
                stdout: out_fifo,
                stderr: err_fifo,
                ..Default::default()
            },
            Some(&lease),
        ))
        .await,
        "tasks.Create",
        &s.id,
    )?;
    note(c, &s.id, |x| x.task = true);
    if let Network::Egress { allow } = &s.config.network {
        // Before the process starts: it never runs without its network's rules.
        let (id, pid, allow) = (s.id.clone(), task.pid, allow.clone());
        tokio::task::spawn_blocking(move || egress::attach(&id, pid, &allow))
            .await
            .map_err(|e| RuntimeError::invalid("egress network", e.to_string()))??;
        note(c, &s.id, |x| x.egress = true);
    }
    Ok(())
}
