//! containerd as arena's container engine: a connection in arena's own namespace (every
//! request may carry a lease, so that what a crashed process leaves stays findable), and the
//! [`ContainerRuntime`] verbs, one file each.

mod create;
mod delete;
pub mod gc;
pub mod import;
mod kill;
pub mod lease;
pub mod logs;
mod start;
mod wait;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arena_image::{ImageRecord, Store};
use async_trait::async_trait;
use containerd_client::tonic::transport::Channel;
use tonic::metadata::MetadataValue;
use tonic::Request;

use crate::boundary::{ContainerRuntime, ContainerSpec, Leftovers, LogStats};
use crate::error::{Result, RuntimeError};
use crate::ImageRef;

pub const DEFAULT_SOCKET: &str = "/run/containerd/containerd.sock";
pub const DEFAULT_NAMESPACE: &str = "arena";
pub const DEFAULT_SNAPSHOTTER: &str = "overlayfs";
pub const RUNC: &str = "io.containerd.runc.v2";
pub const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";

#[derive(Clone)]
pub struct Containerd {
    pub(crate) channel: Channel,
    pub namespace: String,
    pub snapshotter: String,
    pub socket: PathBuf,
    /// What `create` made for each container this process has not deleted yet.
    pub(crate) created: Arc<Mutex<HashMap<String, create::Created>>>,
}

/// Whether `s` can be a containerd namespace: containerd accepts letters, digits, `_`, `-`
/// and `.`, starting with a letter or digit, up to 76 characters.
pub fn valid_namespace(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 76
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

impl Containerd {
    pub async fn connect(socket: &Path, namespace: &str) -> Result<Containerd> {
        if !valid_namespace(namespace) {
            return Err(RuntimeError::invalid(
                format!("namespace `{namespace}`"),
                "a containerd namespace is 1 to 76 letters, digits, `_`, `-` or `.`, starting with a letter or digit",
            ));
        }
        let channel =
            containerd_client::connect(socket)
                .await
                .map_err(|e| RuntimeError::Connect {
                    socket: socket.to_path_buf(),
                    message: crate::error::with_causes(&e),
                })?;
        let c = Containerd {
            channel,
            namespace: namespace.to_string(),
            snapshotter: DEFAULT_SNAPSHOTTER.to_string(),
            socket: socket.to_path_buf(),
            created: Default::default(),
        };
        // A cheap round trip, so that a wrong socket fails here and not in the middle of a run.
        let mut v =
            containerd_client::services::v1::version_client::VersionClient::new(c.channel.clone());
        v.version(Request::new(()))
            .await
            .map_err(|e| RuntimeError::Connect {
                socket: socket.to_path_buf(),
                message: e.message().to_string(),
            })?;
        Ok(c)
    }

    /// A request in our namespace, under `lease` if given.
    pub(crate) fn req<T>(&self, msg: T, lease: Option<&str>) -> Request<T> {
        let mut r = Request::new(msg);
        let md = r.metadata_mut();
        // Checked at connect (valid_namespace) and built by us (leases): both ASCII.
        if let Ok(ns) = MetadataValue::try_from(self.namespace.as_str()) {
            md.insert("containerd-namespace", ns);
        }
        if let Some(l) = lease.and_then(|l| MetadataValue::try_from(l).ok()) {
            md.insert("containerd-lease", l);
        }
        r
    }

    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }
}

#[async_trait]
impl ContainerRuntime for Containerd {
    fn namespace(&self) -> &str {
        &self.namespace
    }

    async fn ensure_image(&self, store: &Store, rec: &ImageRecord) -> Result<ImageRef> {
        import::ensure_image(self, store, rec).await
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<()> {
        create::create(self, spec).await
    }

    async fn start(&self, id: &str) -> Result<()> {
        start::start(self, id).await
    }

    async fn wait(&self, id: &str) -> Result<u32> {
        wait::wait(self, id).await
    }

    async fn kill(&self, id: &str, signal: u32) -> Result<()> {
        kill::kill(self, id, signal).await
    }

    async fn delete(&self, id: &str) -> Result<LogStats> {
        delete::delete(self, id).await
    }

    async fn leftovers(&self) -> Result<Leftovers> {
        gc::leftovers(self).await
    }

    async fn remove(&self, found: &Leftovers) -> Result<()> {
        gc::remove(self, found).await
    }

    async fn mount_scratch(&self, dir: &Path, bytes: u64) -> Result<()> {
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || crate::scratch::mount_tmpfs(&dir, bytes))
            .await
            .map_err(|e| RuntimeError::invalid("mount", e.to_string()))?
    }

    async fn unmount_scratch(&self, dir: &Path) -> Result<()> {
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || crate::scratch::unmount(&dir))
            .await
            .map_err(|e| RuntimeError::invalid("umount", e.to_string()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_containerd_accepts() {
        for ok in ["arena", "arena-test.1", "a", "9x_y"] {
            assert!(valid_namespace(ok), "{ok}");
        }
        for bad in ["", "-a", "ünï", "a b", "a/b", &"x".repeat(77)] {
            assert!(!valid_namespace(bad), "{bad}");
        }
    }
}
