//! Air-gap bundles end to end through `arenactl bundle export/import`: export is
//! byte-for-byte reproducible, an imported store satisfies the lock without any build input,
//! and a corrupted or truncated bundle is refused with nothing left behind.
//!
//! The testbase image needs its pinned Debian packages: they are fetched once with
//! `ci/fetch-debs.sh` into `target/arena-debs` (or taken from `$ARENA_DEB_DIR`). Needs neither
//! root nor containerd.

use crate::common;

use common::images::{arenactl, copy_inputs, failed, lock, ok};

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
