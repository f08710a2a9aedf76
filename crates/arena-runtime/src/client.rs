//! A connection to containerd in arena's own namespace, with an optional lease attached to
//! every request (what a crashed process leaves behind stays findable under its lease).

use std::path::{Path, PathBuf};

use containerd_client::tonic::transport::Channel;
use tonic::metadata::MetadataValue;
use tonic::Request;

use crate::error::{Result, RuntimeError};

pub const DEFAULT_SOCKET: &str = "/run/containerd/containerd.sock";
pub const DEFAULT_NAMESPACE: &str = "arena";
pub const DEFAULT_SNAPSHOTTER: &str = "overlayfs";
/// Label put on everything arena creates, so `arenactl gc` can find it.
pub const MANAGED_LABEL: &str = "dev.arena.managed";

#[derive(Clone)]
pub struct Containerd {
    pub(crate) channel: Channel,
    pub namespace: String,
    pub snapshotter: String,
    pub socket: PathBuf,
}

impl Containerd {
    pub async fn connect(socket: &Path, namespace: &str) -> Result<Containerd> {
        let channel =
            containerd_client::connect(socket)
                .await
                .map_err(|e| RuntimeError::Connect {
                    socket: socket.to_path_buf(),
                    message: e.to_string(),
                })?;
        let c = Containerd {
            channel,
            namespace: namespace.to_string(),
            snapshotter: DEFAULT_SNAPSHOTTER.to_string(),
            socket: socket.to_path_buf(),
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
        md.insert(
            "containerd-namespace",
            MetadataValue::try_from(self.namespace.as_str()).expect("namespace is ASCII"),
        );
        if let Some(l) = lease {
            md.insert(
                "containerd-lease",
                MetadataValue::try_from(l).expect("lease id is ASCII"),
            );
        }
        r
    }

    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }
}
