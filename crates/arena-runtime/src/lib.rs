//! arena-runtime: containers through a real containerd (containerd-client, gRPC). Imports
//! locked images from arena's store, builds OCI runtime specs with oci-spec (read-only binds,
//! tmpfs /tmp, limits, network mode, GPU device profiles), runs containers with a timeout that
//! kills every process, captures their output with a cap, and always cleans up, with leases
//! so that leftovers of a crash are found by `gc`.

pub mod chain;
pub mod client;
pub mod error;
pub mod gc;
pub mod gpu;
pub mod import;
pub mod lease;
pub mod logs;
pub mod run;
pub mod spec;

pub use client::{Containerd, DEFAULT_NAMESPACE, DEFAULT_SOCKET};
pub use error::{Result, RuntimeError};
pub use gpu::{BindMount, DeviceGrant, GpuProfile};
pub use import::{ensure_image, verify_image, ImageRef};
pub use run::{run_container, RunOutcome, RunRequest};
pub use spec::{ContainerConfig, Limits, Network};
