//! Lockfiles end to end through `arenactl lock` and `arenactl image verify`: builds are
//! reproducible across stores, umasks and mtimes (and match the committed lockfiles/cpu.lock),
//! only a changed task's image changes, verify names every mismatch, and the `cuda-host` set
//! captures a stand-in host root.
//!
//! The testbase image needs its pinned Debian packages: they are fetched once with
//! `ci/fetch-debs.sh` into `target/arena-debs` (or taken from `$ARENA_DEB_DIR`). Needs neither
//! root nor containerd.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::images::{arenactl, copy_inputs, failed, image_section, lock, ok};
use common::{cli_tarballs, repo};

#[test]
fn builds_are_reproducible_and_only_a_changed_task_changes() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    copy_inputs(&a, "022", "2001-02-03 04:05:06");
    copy_inputs(&b, "077", "2024-12-31 23:59:59");
    let lock_a = lock(&a, &t.path().join("store-a"), "022");
    let lock_b = lock(&b, &t.path().join("store-b"), "077");
    assert_eq!(
        lock_a, lock_b,
        "two stores, umasks and mtimes gave different images"
    );
    // And the same as the lockfile committed from another machine.
    let committed = std::fs::read_to_string(repo().join("lockfiles/cpu.lock")).unwrap();
    assert_eq!(
        lock_a, committed,
        "lockfiles/cpu.lock is not reproduced here"
    );

    // One byte of one task's source: only that task's image changes.
    let src = b.join("tasks/python2python/arena/prefix_sum/source/prefix_sum.py");
    let mut text = std::fs::read_to_string(&src).unwrap();
    text = text.replacen("total = 0", "total = 00", 1);
    std::fs::write(&src, text).unwrap();
    let lock_b2 = lock(&b, &t.path().join("store-b"), "077");
    for unchanged in ["testbase", "arena/cpu/python2python/arena/matmul"] {
        assert_eq!(
            image_section(&lock_a, unchanged),
            image_section(&lock_b2, unchanged),
            "{unchanged}"
        );
    }
    let (before, after) = (
        image_section(&lock_a, "arena/cpu/python2python/arena/prefix_sum"),
        image_section(&lock_b2, "arena/cpu/python2python/arena/prefix_sum"),
    );
    let changed: Vec<&str> = before
        .lines()
        .zip(after.lines())
        .filter(|(x, y)| x != y)
        .map(|(x, _)| x.split(" = ").next().unwrap())
        .collect();
    // task digest, derivation, config, manifest, and the task layer's digest, diff_id and
    // size (one more byte); the base layers are untouched.
    assert_eq!(
        changed,
        [
            "derivation",
            "task_digest",
            "config",
            "manifest",
            "digest",
            "diff_id",
            "size"
        ],
        "{before}\n---\n{after}"
    );
    // The testbase's packages, rootfs and bytecode layers, then the task's.
    assert_eq!(before.matches("[[image.layers]]").count(), 4);
}

#[test]
fn verify_names_every_mismatch() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("w");
    copy_inputs(&dir, "022", "2020-01-01");
    let store = t.path().join("store");
    lock(&dir, &store, "022");
    let s = store.to_str().unwrap();
    let out = ok(&arenactl(
        &[
            "image",
            "verify",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--store",
            s,
        ],
        &dir,
    ));
    assert!(out.contains("every digest matches"), "{out}");

    std::fs::write(
        dir.join("tasks/python2python/arena/matmul/scripts/extra.txt"),
        "x",
    )
    .unwrap();
    let err = failed(&arenactl(
        &[
            "image",
            "verify",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--store",
            s,
        ],
        &dir,
    ));
    assert!(
        err.contains("mismatch: python2python/arena/matmul: task digest: expected sha256:"),
        "{err}"
    );
    assert!(
        err.contains("mismatch: python2python/arena/matmul: manifest: expected sha256:"),
        "{err}"
    );
    assert!(
        !err.contains("mismatch: python2python/arena/prefix_sum"),
        "{err}"
    );
    std::fs::remove_file(dir.join("tasks/python2python/arena/matmul/scripts/extra.txt")).unwrap();

    // A stored blob that rotted on disk is named too.
    let lockfile = std::fs::read_to_string(dir.join("lockfiles/cpu.lock")).unwrap();
    let config = lockfile
        .lines()
        .find(|l| l.starts_with("config = "))
        .unwrap();
    let hex = config
        .split("sha256:")
        .nth(1)
        .unwrap()
        .trim_end_matches('"');
    let blob = store.join("blobs/sha256").join(hex);
    std::fs::write(&blob, "rotten").unwrap();
    let err = failed(&arenactl(
        &[
            "image",
            "verify",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--store",
            s,
        ],
        &dir,
    ));
    assert!(err.contains(&format!("stored blob sha256:{hex}")), "{err}");
}

/// A stand-in for an NVIDIA host's root below `dir`: the trees cuda-host.toml captures, a few
/// files and absolute symlinks in them, and the driver's directory it must leave out.
fn stand_in_host(dir: &Path) -> std::path::PathBuf {
    let host = dir.join("host");
    for d in [
        "usr/bin",
        "usr/sbin",
        "usr/lib",
        "usr/lib64",
        "usr/libexec",
        "usr/include",
        "usr/share",
        "usr/local/nvidia/lib64",
        "etc/alternatives",
        "opt/torch/.venv/bin",
    ] {
        std::fs::create_dir_all(host.join(d)).unwrap();
    }
    std::fs::write(host.join("usr/bin/python3.12"), "#!/bin/sh\n").unwrap();
    std::fs::write(host.join("usr/local/nvidia/lib64/libcuda.so.1"), "driver").unwrap();
    std::fs::write(host.join("etc/ld.so.cache"), "cache").unwrap();
    std::os::unix::fs::symlink("/usr/bin/gcc-13", host.join("etc/alternatives/cc")).unwrap();
    std::os::unix::fs::symlink(
        "/usr/bin/python3.12",
        host.join("opt/torch/.venv/bin/python"),
    )
    .unwrap();
    host
}

/// arenactl in `cwd` with `ARENA_HOST_ROOT` set to `host`, or unset.
fn arenactl_host(args: &[&str], cwd: &Path, host: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_arenactl"));
    cmd.args(args).current_dir(cwd);
    match host {
        Some(h) => cmd.env("ARENA_HOST_ROOT", h),
        None => cmd.env_remove("ARENA_HOST_ROOT"),
    };
    cmd.output().unwrap()
}

/// The `cuda-host` set over a stand-in host root: every captured tree lands at its target
/// (an empty one still gives its directory), absolute symlinks are kept as written, the driver
/// directory is not captured, and `image verify` recomputes the lock.
#[test]
fn the_cuda_host_set_captures_a_host_root() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("inputs");
    copy_inputs(&dir, "022", "2001-01-01");
    let host = stand_in_host(t.path());
    let store = t.path().join("store");
    let lock = [
        "lock",
        "--set",
        "cuda-host",
        "--store",
        store.to_str().unwrap(),
    ];
    let out = arenactl_host(&lock, &dir, Some(&host));
    ok(&out);
    let lockfile = dir.join("lockfiles/cuda-host.lock");
    let text = std::fs::read_to_string(&lockfile).unwrap();
    let base = image_section(&text, "cuda-host");
    // Every layer's entries, listed from the store's blobs.
    let entries: Vec<(String, Option<String>)> = values(base, "digest")
        .into_iter()
        .flat_map(|d| layer_entries(&store, d))
        .collect();
    let has = |p: &str| entries.iter().any(|(e, _)| e.trim_end_matches('/') == p);
    for p in [
        "usr/sbin",
        "usr/lib64",
        "usr/bin/python3.12",
        "etc/ld.so.cache",
        "bin",
    ] {
        assert!(has(p), "{p} missing from {entries:?}");
    }
    assert!(entries.contains(&(
        "opt/torch/.venv/bin/python".into(),
        Some("/usr/bin/python3.12".into())
    )));
    assert!(entries.contains(&("etc/alternatives/cc".into(), Some("/usr/bin/gcc-13".into()))));
    assert!(
        !entries.iter().any(|(e, _)| e.starts_with("usr/local")),
        "{entries:?}"
    );
    // Without the variable the recipe names what it needs.
    let out = arenactl_host(&lock, &dir, None);
    let err = failed(&out);
    assert!(
        err.contains("cuda-host.toml") && err.contains("ARENA_HOST_ROOT"),
        "{err}"
    );
    let verify = [
        "image",
        "verify",
        "--image-lock",
        lockfile.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
    ];
    let out = arenactl_host(&verify, &dir, Some(&host));
    ok(&out);
}

/// The entries of the stored layer blob `digest` (a zstd tar), streamed: each path, and
/// where it is a link, what it names.
fn layer_entries(store: &Path, digest: &str) -> Vec<(String, Option<String>)> {
    let hex = digest.trim_start_matches("sha256:");
    let blob = std::fs::File::open(store.join("blobs/sha256").join(hex)).unwrap();
    let mut tar = tar::Archive::new(zstd::stream::read::Decoder::new(blob).unwrap());
    tar.entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let link = e.link_name().unwrap().map(|l| l.display().to_string());
            (e.path().unwrap().display().to_string(), link)
        })
        .collect()
}

/// `key = "value"` lines of a lockfile section, in order.
fn values<'a>(section: &'a str, key: &str) -> Vec<&'a str> {
    let prefix = format!("{key} = \"");
    section
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim_end_matches('"'))
        .collect()
}

/// The `cuda-host-agents` set over the same stand-in host root: Claude Code's and Codex's CLIs
/// on the host-captured base, for an offline NVIDIA node that can bring in no base image. Each
/// agent image's base is the cuda-host image of the same lock, its layers are that image's
/// layers and then its own (the CLI where its agent file runs it), and `image verify`
/// recomputes the lock.
#[test]
fn the_cuda_host_agents_set_puts_the_clis_on_the_host_base() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("inputs");
    copy_inputs(&dir, "022", "2001-01-01");
    let host = stand_in_host(t.path());
    let tarballs = cli_tarballs(&["images/claude-code-host.toml", "images/codex-host.toml"]);
    let store = t.path().join("store");
    let s = store.to_str().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_arenactl"));
    cmd.args(["lock", "--set", "cuda-host-agents", "--store", s])
        .current_dir(&dir)
        .env("ARENA_HOST_ROOT", &host)
        .env("ARENA_TARBALL_DIR", &tarballs);
    ok(&cmd.output().unwrap());
    let text = std::fs::read_to_string(dir.join("lockfiles/cuda-host-agents.lock")).unwrap();
    let base = image_section(&text, "cuda-host");
    let base_layers = values(base, "digest");
    for (image, cli) in [
        ("claude-code-host", "opt/claude-code/package/claude"),
        ("codex-host", "opt/codex/bin/arena-codex"),
    ] {
        let section = image_section(&text, image);
        assert_eq!(values(section, "base"), values(base, "manifest"), "{image}");
        let layers = values(section, "digest");
        assert!(
            layers.len() > base_layers.len() && layers[..base_layers.len()] == base_layers[..],
            "{image}: {layers:?} does not begin with cuda-host's {base_layers:?}"
        );
        let own: Vec<(String, Option<String>)> = layers[base_layers.len()..]
            .iter()
            .flat_map(|d| layer_entries(&store, d))
            .collect();
        assert!(
            own.iter().any(|(e, _)| e == cli),
            "{image}: {cli} not among its own layers' {own:?}"
        );
        let agent = arena_run::Agent::load(&repo().join(format!("agents/{image}.toml"))).unwrap();
        assert_eq!(agent.image, arena_run::AgentImage::Locked(image.into()));
    }
    let mut verify = Command::new(env!("CARGO_BIN_EXE_arenactl"));
    verify
        .args([
            "image",
            "verify",
            "--image-lock",
            "lockfiles/cuda-host-agents.lock",
        ])
        .args(["--store", s])
        .current_dir(&dir)
        .env("ARENA_HOST_ROOT", &host)
        .env("ARENA_TARBALL_DIR", &tarballs);
    ok(&verify.output().unwrap());
}
