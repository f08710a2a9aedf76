//! Generates the runner's client and server from proto/arena/v1/runner.proto. `proto/` in this
//! crate is a link to the workspace's top-level `proto/` (where the API is read and reviewed);
//! `cargo package` copies what it points to, so the packaged crate carries its own proto.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/arena/v1/runner.proto";
    println!("cargo:rerun-if-changed={proto}");
    tonic_prost_build::configure().compile_protos(&[proto], &["proto"])?;
    Ok(())
}
