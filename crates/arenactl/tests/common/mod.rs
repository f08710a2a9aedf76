//! Helpers shared by arenactl's integration tests.
#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub mod cli;
pub mod daemon;
pub mod images;
pub mod test_host;

/// Builds `ci/fixtures/<fixture>` into a static program at `out` with gcc (`flags` beside
/// `-static`): the probes the adversarial tests run inside containers whose images have no
/// libc of their own to offer them.
pub fn build_static(fixture: &str, out: &Path, flags: &[&str]) {
    let st = Command::new("gcc")
        .arg("-static")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(repo().join("ci/fixtures").join(fixture))
        .status()
        .unwrap();
    assert!(st.success(), "gcc -static (libc6-dev) builds {fixture}");
}

/// Every file below `dir`, depth first (none where `dir` is missing).
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_below(&p));
        } else {
            out.push(p);
        }
    }
    out
}

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
