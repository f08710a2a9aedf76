//! Helpers shared by arenactl's integration tests.
#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub mod cli;
pub mod daemon;
pub mod images;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn debs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::var_os("ARENA_DEB_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("target/arena-debs"));
        let st = Command::new("bash")
            .arg(repo().join("ci/fetch-debs.sh"))
            .arg(repo().join("images/testbase.toml"))
            .arg(&dir)
            .status()
            .expect("run ci/fetch-debs.sh");
        assert!(
            st.success(),
            "ci/fetch-debs.sh failed: the testbase packages are needed"
        );
        dir
    })
}
