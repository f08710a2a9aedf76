//! The image store end to end through `arenactl`: reproducible builds and lockfiles, OCI
//! layouts that independent tools (skopeo, umoci) read, verification, air-gap bundles, and
//! the refusal of every bad input the issue names.
//!
//! The testbase image needs its pinned Debian packages: they are fetched once with
//! `ci/fetch-debs.sh` into `target/arena-debs` (or taken from `$ARENA_DEB_DIR`).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{debs, repo};

/// Runs arenactl through `sh` with the given umask.
fn arenactl_umask(umask: &str, args: &[&str], cwd: &Path) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_arenactl"))
        .args(args)
        .env("ARENA_DEB_DIR", debs())
        .current_dir(cwd);
    cmd.output().unwrap()
}

fn arenactl(args: &[&str], cwd: &Path) -> Output {
    arenactl_umask("022", args, cwd)
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "arenactl failed ({:?}):\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn failed(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected exit 1: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// A copy of the repo's images/, tasks/ and lockfiles/ made under `umask`, with every file's
/// mtime set to `mtime` (a `touch -d` date).
fn copy_inputs(dst: &Path, umask: &str, mtime: &str) {
    let r = repo();
    let script = format!(
        "umask {umask} && mkdir -p {d} && cp -r {r}/images {r}/tasks {d}/ && mkdir -p {d}/lockfiles \
         && find {d} -exec touch -h -d '{mtime}' {{}} +",
        d = dst.display(),
        r = r.display()
    );
    assert!(Command::new("sh")
        .arg("-c")
        .arg(script)
        .status()
        .unwrap()
        .success());
}

fn lock(dir: &Path, store: &Path, umask: &str) -> String {
    ok(&arenactl_umask(
        umask,
        &["lock", "--store", store.to_str().unwrap()],
        dir,
    ));
    std::fs::read_to_string(dir.join("lockfiles/cpu.lock")).unwrap()
}

fn image_section<'a>(lockfile: &'a str, name: &str) -> &'a str {
    let start = lockfile.find(&format!("name = \"{name}\"")).expect(name);
    let end = lockfile[start..]
        .find("\n[[image]]")
        .map_or(lockfile.len(), |e| start + e);
    &lockfile[start..end]
}

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
    assert_eq!(before.matches("[[image.layers]]").count(), 3);
}

#[test]
fn unchanged_inputs_are_not_rebuilt() {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    let s = store.to_str().unwrap();
    let recipe = repo().join("images/testbase.toml");
    let r = recipe.to_str().unwrap();
    let first: serde_json::Value = serde_json::from_str(&ok(&arenactl(
        &["image", "build", r, "--store", s, "--json"],
        t.path(),
    )))
    .unwrap();
    let second: serde_json::Value = serde_json::from_str(&ok(&arenactl(
        &["image", "build", r, "--store", s, "--json"],
        t.path(),
    )))
    .unwrap();
    assert_eq!(first["built"], true);
    assert_eq!(second["built"], false);
    assert_eq!(first["image"], second["image"]);
}

/// Builds the testbase image with gzip layers (umoci 0.4 reads no zstd) into `store`.
fn build_gzip_testbase(dir: &Path, store: &Path) {
    let recipe = std::fs::read_to_string(repo().join("images/testbase.toml"))
        .unwrap()
        .replace("compression = \"zstd\"", "compression = \"gzip\"")
        .replace("name = \"testbase\"", "name = \"testbase-gz\"")
        .replace(
            "path = \"testbase/rootfs\"",
            &format!(
                "path = \"{}\"",
                repo().join("images/testbase/rootfs").display()
            ),
        );
    let file = dir.join("testbase-gz.toml");
    std::fs::write(&file, recipe).unwrap();
    ok(&arenactl(
        &[
            "image",
            "build",
            file.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
        dir,
    ));
}

#[test]
fn the_store_is_an_oci_layout_that_skopeo_and_umoci_read() {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    ok(&arenactl(
        &[
            "image",
            "build",
            repo().join("images/testbase.toml").to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
        t.path(),
    ));
    build_gzip_testbase(t.path(), &store);
    for image in ["testbase", "testbase-gz"] {
        // skopeo checks media types, the index, and every blob's digest while copying.
        let out = Command::new("skopeo")
            .args(["copy", "--quiet"])
            .arg(format!("oci:{}:{image}", store.display()))
            .arg(format!(
                "dir:{}",
                t.path().join(format!("copy-{image}")).display()
            ))
            .output()
            .expect("skopeo is installed by ci/setup.sh");
        assert!(
            out.status.success(),
            "skopeo: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bundle = t.path().join("bundle");
    let out = Command::new("umoci")
        .args(["unpack", "--rootless", "--image"])
        .arg(format!("{}:testbase-gz", store.display()))
        .arg(&bundle)
        .output()
        .expect("umoci is installed by ci/setup.sh");
    assert!(
        out.status.success(),
        "umoci: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rootfs = bundle.join("rootfs");
    assert!(rootfs.join("usr/bin/python3.11").is_file());
    assert_eq!(
        std::fs::read_link(rootfs.join("bin")).unwrap(),
        Path::new("usr/bin")
    );
    assert_eq!(
        std::fs::read_link(rootfs.join("usr/bin/sh")).unwrap(),
        Path::new("busybox")
    );
    let meta = std::fs::symlink_metadata(rootfs.join("usr/bin/busybox")).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::mtime(&meta),
        0,
        "mtime not normalized"
    );
    // The unpacked image runs the harness's Python: tried where we may chroot (CI runs as root).
    if unsafe_getuid() == 0 {
        let out = Command::new("chroot")
            .arg(&rootfs)
            .args([
                "/usr/bin/python3",
                "-c",
                "import json, statistics, random; print('py-ok')",
            ])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "py-ok",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn unsafe_getuid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
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

#[test]
fn bundles_round_trip_and_refuse_damage() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("w");
    copy_inputs(&dir, "022", "2020-01-01");
    let store = t.path().join("store");
    let lockfile = lock(&dir, &store, "022");
    let bundle = t.path().join("images.tar");
    let b = bundle.to_str().unwrap();
    ok(&arenactl(
        &[
            "bundle",
            "export",
            "--image-lock",
            "lockfiles/cpu.lock",
            "-o",
            b,
            "--store",
            store.to_str().unwrap(),
        ],
        &dir,
    ));
    // Exporting again gives the same bytes.
    let bundle2 = t.path().join("images2.tar");
    ok(&arenactl(
        &[
            "bundle",
            "export",
            "--image-lock",
            "lockfiles/cpu.lock",
            "-o",
            bundle2.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
        &dir,
    ));
    assert_eq!(
        std::fs::read(&bundle).unwrap(),
        std::fs::read(&bundle2).unwrap()
    );

    let fresh = t.path().join("fresh");
    let f = fresh.to_str().unwrap();
    let lock_out = t.path().join("imported.lock");
    let out = ok(&arenactl(
        &[
            "bundle",
            "import",
            b,
            "--store",
            f,
            "--lock-out",
            lock_out.to_str().unwrap(),
            "--json",
        ],
        t.path(),
    ));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["blobs"], v["new_blobs"]);
    assert_eq!(std::fs::read_to_string(&lock_out).unwrap(), lockfile);
    // The imported store satisfies the lock without any build input: verify in a copy of the
    // inputs against the fresh store finds nothing to rebuild and nothing wrong.
    let out = ok(&arenactl(
        &[
            "image",
            "verify",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--store",
            f,
        ],
        &dir,
    ));
    assert!(out.contains("every digest matches"), "{out}");
    let again: serde_json::Value = serde_json::from_str(&ok(&arenactl(
        &["bundle", "import", b, "--store", f, "--json"],
        t.path(),
    )))
    .unwrap();
    assert_eq!(again["new_blobs"], 0);

    // One flipped byte inside the big layer, and a truncated copy: both refused, nothing left.
    let data = std::fs::read(&bundle).unwrap();
    let mut bad = data.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x01;
    let bad_path = t.path().join("bad.tar");
    std::fs::write(&bad_path, &bad).unwrap();
    let trunc_path = t.path().join("trunc.tar");
    std::fs::write(&trunc_path, &data[..data.len() * 2 / 3]).unwrap();
    let victim = t.path().join("victim");
    let vs = victim.to_str().unwrap();
    let err = failed(&arenactl(
        &[
            "bundle",
            "import",
            bad_path.to_str().unwrap(),
            "--store",
            vs,
        ],
        t.path(),
    ));
    assert!(
        err.contains("(corrupted): digest mismatch: expected sha256:"),
        "{err}"
    );
    let err = failed(&arenactl(
        &[
            "bundle",
            "import",
            trunc_path.to_str().unwrap(),
            "--store",
            vs,
        ],
        t.path(),
    ));
    assert!(err.contains("is truncated"), "{err}");
    assert_eq!(
        std::fs::read_dir(victim.join("blobs/sha256"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(std::fs::read_dir(victim.join("tmp")).unwrap().count(), 0);
    let index = std::fs::read_to_string(victim.join("index.json")).unwrap();
    assert!(index.contains("\"manifests\":[]"), "{index}");
}

fn recipe_error(dir: &Path, body: &str) -> String {
    let file = dir.join(format!("r{}.toml", body.len()));
    std::fs::write(&file, format!("name = \"bad\"\n{body}")).unwrap();
    failed(&arenactl(
        &[
            "image",
            "build",
            file.to_str().unwrap(),
            "--store",
            dir.join("store").to_str().unwrap(),
        ],
        dir,
    ))
}

#[test]
fn bad_inputs_are_refused_by_name() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let zero = format!("sha256:{}", "0".repeat(64));

    // A base layout that is not there.
    let err = recipe_error(
        d,
        &format!("[base]\nkind = \"oci-layout\"\npath = \"nowhere\"\nmanifest = \"{zero}\"\n"),
    );
    assert!(
        err.contains("nowhere: not found: base image OCI layout"),
        "{err}"
    );

    // A base layout that exists, pinned by a digest it does not hold.
    let layout = d.join("layout");
    ok(&arenactl(
        &[
            "image",
            "build",
            repo().join("images/testbase.toml").to_str().unwrap(),
            "--store",
            layout.to_str().unwrap(),
        ],
        d,
    ));
    let err = recipe_error(
        d,
        &format!("[base]\nkind = \"oci-layout\"\npath = \"layout\"\nmanifest = \"{zero}\"\n"),
    );
    assert!(err.contains(&format!("not found: blob {zero}")), "{err}");

    // A .deb whose bytes are not the pinned ones.
    let debdir = d.join("debs");
    std::fs::create_dir(&debdir).unwrap();
    let name = "zlib1g_1%3a1.2.13.dfsg-1_amd64.deb";
    let mut bytes = std::fs::read(debs().join(name)).unwrap();
    bytes.push(0);
    std::fs::write(debdir.join(name), bytes).unwrap();
    let file = d.join("deb.toml");
    std::fs::write(
        &file,
        "name = \"bad\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"debs\"\npackages = [{ name = \"zlib1g\", version = \"1:1.2.13.dfsg-1\", sha256 = \"d7dd1d1411fedf27f5e27650a6eff20ef294077b568f4c8c5e51466dc7c08ce4\" }]\n",
    )
    .unwrap();
    let err = failed(&arenactl(
        &[
            "image",
            "build",
            file.to_str().unwrap(),
            "--store",
            d.join("store").to_str().unwrap(),
            "--deb-dir",
            debdir.to_str().unwrap(),
        ],
        d,
    ));
    assert!(
        err.contains(&format!(
            "{} (package zlib1g=1:1.2.13.dfsg-1): digest mismatch: expected sha256:d7dd1d14",
            debdir.join(name).display()
        )),
        "{err}"
    );

    // A tarball with a path-traversal entry.
    let py = "import tarfile, io\nt = tarfile.open('evil.tar', 'w')\ni = tarfile.TarInfo('../../etc/cron.d/x')\ni.size = 1\nt.addfile(i, io.BytesIO(b'x'))\nt.close()\n";
    assert!(Command::new("python3")
        .args(["-c", py])
        .current_dir(d)
        .status()
        .unwrap()
        .success());
    let err = recipe_error(
        d,
        "[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"tarball\"\npath = \"evil.tar\"\n",
    );
    assert!(
        err.contains("evil.tar: entry `../../etc/cron.d/x`: path contains `..`"),
        "{err}"
    );

    // Nothing of the refused builds became visible under a name.
    let index = std::fs::read_to_string(d.join("store/index.json")).unwrap();
    assert!(index.contains("\"manifests\":[]"), "{index}");
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
    let host = t.path().join("host");
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
    let mut entries = Vec::new();
    for line in base.lines().filter(|l| l.starts_with("digest = ")) {
        let hex = line.split("sha256:").nth(1).unwrap().trim_end_matches('"');
        let blob = store.join("blobs/sha256").join(hex);
        let tar = zstd::decode_all(std::fs::File::open(blob).unwrap()).unwrap();
        for e in tar::Archive::new(&tar[..]).entries().unwrap() {
            let e = e.unwrap();
            let link = e.link_name().unwrap().map(|l| l.display().to_string());
            entries.push((e.path().unwrap().display().to_string(), link));
        }
    }
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
