//! Image builds end to end through `arenactl image build`: unchanged inputs are not rebuilt,
//! the store is an OCI layout that independent tools (skopeo, umoci) read, and every bad input
//! the issue names is refused by name.
//!
//! The testbase image needs its pinned Debian packages: they are fetched once with
//! `ci/fetch-debs.sh` into `target/arena-debs` (or taken from `$ARENA_DEB_DIR`). Needs neither
//! root nor containerd, but skopeo and umoci must be installed (ci/setup.sh); the
//! unpacked image's Python is run under chroot only as root.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::images::{arenactl, failed, ok};
use common::{debs, repo};

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

    // Bytecode with nothing below to compile it, and with an interpreter the layers lack.
    let err = recipe_error(
        d,
        "[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"bytecode\"\npaths = [\"/usr/lib\"]\n",
    );
    assert!(
        err.contains("layer[0]: a bytecode layer needs layers below it"),
        "{err}"
    );
    std::fs::create_dir_all(d.join("tree/usr/lib")).unwrap();
    let err = recipe_error(
        d,
        "[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"directory\"\npath = \"tree\"\n[[layer]]\nkind = \"bytecode\"\npaths = [\"/usr/lib\"]\n",
    );
    assert!(
        err.contains(
            "bytecode layer (/usr/bin/python3): the layers below hold no glibc dynamic loader"
        ),
        "{err}"
    );

    // Nothing of the refused builds became visible under a name.
    let index = std::fs::read_to_string(d.join("store/index.json")).unwrap();
    assert!(index.contains("\"manifests\":[]"), "{index}");
}
