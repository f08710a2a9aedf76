//! The boundary between arena and a container engine: the verbs a task run needs — import an
//! image, create, start, wait for, kill and delete a container, list and remove what a crashed
//! process left — as one narrow trait. containerd implements it for real
//! ([`crate::Containerd`]); [`crate::fake::FakeRuntime`] implements it in memory so that
//! everything above (the container lifecycle, the runner's task runs) is unit-tested without
//! root or a daemon.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use arena_image::{ImageRecord, Store};
use async_trait::async_trait;
use serde::Serialize;

use crate::error::Result;
use crate::spec::ContainerConfig;
use crate::ImageRef;

/// Label put on everything arena creates, so `arenactl gc` can find it.
pub const MANAGED_LABEL: &str = "dev.arena.managed";
/// Label naming the process that owns a container (`<pid>@<start time>`): a container whose
/// owner is gone is a leftover, whatever its run.
pub const OWNER_LABEL: &str = "dev.arena.owner";
/// Label holding the Unix time after which a container must not be running any more: a
/// container found past it is killed by the next `gc` or runner start, owner alive or not.
pub const DEADLINE_LABEL: &str = "dev.arena.deadline";

/// Everything a container is created from.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    /// Container id (also the snapshot key and the lease's suffix).
    pub id: String,
    pub image: ImageRef,
    pub config: ContainerConfig,
    pub labels: HashMap<String, String>,
    /// Where the process's stdout and stderr are written, each cut at `log_cap` bytes (the
    /// rest is drained and counted).
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub log_cap: u64,
    /// How long the engine keeps what the container holds if nobody removes it (a last
    /// resort if even `arenactl gc` never runs).
    pub lease_ttl: Duration,
}

/// What one output stream produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Captured {
    /// Bytes kept in the log file.
    pub written: u64,
    /// Bytes the process wrote.
    pub total: u64,
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.total > self.written
    }
}

/// The output of a deleted container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogStats {
    pub stdout: Captured,
    pub stderr: Captured,
}

/// What arena left in the engine: containers (with their labels), snapshots, leases.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Leftovers {
    pub containers: Vec<String>,
    pub snapshots: Vec<String>,
    pub leases: Vec<String>,
    /// Each container's labels (owner and deadline among them).
    #[serde(skip)]
    pub labels: BTreeMap<String, HashMap<String, String>>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.snapshots.is_empty() && self.leases.is_empty()
    }

    /// Only what belongs to containers whose id satisfies `keep` (snapshot keys are container
    /// ids; container leases are `arena-run-<id>`).
    pub fn only(mut self, keep: impl Fn(&str) -> bool) -> Leftovers {
        self.containers.retain(|id| keep(id));
        self.snapshots.retain(|k| keep(k));
        self.leases
            .retain(|l| l.strip_prefix(RUN_LEASE_PREFIX).is_some_and(&keep));
        self.labels.retain(|id, _| keep(id));
        self
    }
}

/// Prefix of a container's lease: `arena-run-<container id>`.
pub const RUN_LEASE_PREFIX: &str = "arena-run-";
/// Prefix of the short-lived lease an image import holds: `arena-import-<pid>-<n>-<manifest>`.
pub const IMPORT_LEASE_PREFIX: &str = "arena-import-";

/// The container engine, as arena uses it. Every verb names the container by id; `create`
/// and `delete` bracket everything else, and `delete` removes whatever `create` made, also
/// after a `create` that failed half-way.
#[async_trait]
pub trait ContainerRuntime: Send + Sync + 'static {
    /// The engine's namespace (containerd's), for messages.
    fn namespace(&self) -> &str;

    /// Makes the engine hold the locked image, importing what is missing from `store`; an
    /// image of the same name with another manifest is refused, naming both digests.
    async fn ensure_image(&self, store: &Store, rec: &ImageRecord) -> Result<ImageRef>;

    /// Creates a stopped container: a fresh root filesystem on the image, the runtime spec
    /// built from `spec.config`, output into the log files.
    async fn create(&self, spec: &ContainerSpec) -> Result<()>;

    async fn start(&self, id: &str) -> Result<()>;

    /// Waits until the container's process exits; its exit status (128 + signal if killed).
    async fn wait(&self, id: &str) -> Result<u32>;

    /// Sends `signal` to every process of the container.
    async fn kill(&self, id: &str, signal: u32) -> Result<()>;

    /// Removes the container and everything created for it (killing what still runs), and
    /// returns what its output streams produced. Deleting an unknown id is not an error.
    async fn delete(&self, id: &str) -> Result<LogStats>;

    /// Everything arena left in the engine.
    async fn leftovers(&self) -> Result<Leftovers>;

    /// Removes what `found` lists (tasks are killed first); absent entries are skipped.
    async fn remove(&self, found: &Leftovers) -> Result<()>;

    /// Makes `dir` (created if missing, empty) a file system of at most `bytes` bytes, so that
    /// what a container writes there cannot fill the host's disk.
    async fn mount_scratch(&self, dir: &std::path::Path, bytes: u64) -> Result<()>;

    /// Releases what [`ContainerRuntime::mount_scratch`] made at `dir` (its content goes);
    /// nothing to release is not an error.
    async fn unmount_scratch(&self, dir: &std::path::Path) -> Result<()>;
}
