//! Helpers shared by arenactl's integration tests.
#![allow(dead_code)] // not every helper is used by every build of the tests

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub mod cli;
pub mod daemon;
pub mod images;
pub mod served;
pub mod test_host;
pub mod tier;

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

/// A store of locked images kept between test runs, named `name` and keyed by the files its
/// images are built from (`key`: a lockfile, or a recipe): `$ARENA_TEST_STORES/<name>-<digest>`
/// (default `~/.cache/arena/stores`, as debs and wheels are kept; `ci/test-cold.sh` points it
/// at an empty directory, which proves a fresh machine builds everything). A test still
/// verifies every blob it uses (`image verify` and a run hash them again), so a damaged store
/// fails, and a changed lockfile or recipe gets a store of its own.
pub fn cached_store(name: &str, key: &[&str]) -> PathBuf {
    let root = std::env::var_os("ARENA_TEST_STORES")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/arena/stores")))
        .unwrap_or_else(|| repo().join("target/arena-stores"));
    let mut bytes = Vec::new();
    for k in key {
        bytes.extend(std::fs::read(repo().join(k)).unwrap_or_else(|e| panic!("{k}: {e}")));
        bytes.push(0);
    }
    root.join(format!(
        "{name}-{}",
        arena_digest::Digest::of_bytes(&bytes).short()
    ))
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The agent CLIs' pinned tarballs: the user's cache ($ARENA_TARBALL_DIR, else
/// ~/.cache/arena/tarballs; the CLIs are 170-190 MB each, and arena-endpoint's tests share it),
/// with the `url` tarballs of each of `recipes` fetched into it once and checked against their
/// sha256 (ci/fetch-tarballs.sh).
pub fn cli_tarballs(recipes: &[&str]) -> PathBuf {
    let dir = std::env::var_os("ARENA_TARBALL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/arena/tarballs")
        });
    for recipe in recipes {
        let o = Command::new("bash")
            .arg(repo().join("ci/fetch-tarballs.sh"))
            .arg(repo().join(recipe))
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "ci/fetch-tarballs.sh {recipe}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    dir
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
