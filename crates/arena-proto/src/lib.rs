//! arena-proto: the runner's gRPC API, generated at build time from `proto/arena/v1/*.proto`.

/// Package `arena.v1`.
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("arena.v1");
}
