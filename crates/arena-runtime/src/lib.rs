//! arena-runtime: containers for arena. One narrow trait ([`ContainerRuntime`]) is the
//! boundary to the container engine: containerd implements it for real (containerd-client,
//! gRPC: images imported from arena's store, snapshots, containers, tasks, capped output,
//! leases so that leftovers of a crash are found), and [`fake::FakeRuntime`] in memory for
//! unit tests (feature `fake`). Above it: OCI runtime specs built with oci-spec (read-only
//! binds, tmpfs, limits, seccomp, network mode, GPU device profiles), the lifecycle of one
//! container with a timeout that kills every process, and the clean-up policies.

pub mod boundary;
pub mod chain;
pub mod cleanup;
pub mod containerd;
pub mod egress;
pub mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod gpu;
mod image_ref;
pub mod lifecycle;
pub mod scratch;
pub mod seccomp;
pub mod spec;

pub use boundary::{ContainerRuntime, ContainerSpec, Leftovers, LogStats, MANAGED_LABEL};
pub use containerd::import::verify_image;
pub use containerd::{Containerd, DEFAULT_NAMESPACE, DEFAULT_SOCKET};
pub use error::{Result, RuntimeError};
pub use gpu::{BindMount, DeviceGrant, GpuProfile};
pub use image_ref::ImageRef;
pub use lifecycle::{run_container, RunOutcome, RunRequest};
pub use spec::{ContainerConfig, Limits, Network, Tmpfs};
