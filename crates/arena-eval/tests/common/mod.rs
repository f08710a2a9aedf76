//! What the tests of the Python evaluator share.

use std::process::Command;

/// The JSON a Python script prints, run by the host's python3 as the runner runs the
/// evaluator (`-I -B`), with the evaluator's directory as its first argument.
pub fn evaluator_python(script: &str) -> serde_json::Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/trusted/arena_trusted");
    let o = Command::new("python3")
        .args(["-I", "-B", "-c", script, dir])
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}
