//! Generates the runner's client and server from proto/arena/v1/runner.proto.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../../proto/arena/v1/runner.proto";
    println!("cargo:rerun-if-changed={proto}");
    tonic_prost_build::configure().compile_protos(&[proto], &["../../proto"])?;
    Ok(())
}
