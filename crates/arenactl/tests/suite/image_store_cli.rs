//! `arenactl image ls` and `image prune` on a store a test writes blob by blob: what is listed,
//! what a lockfile keeps (and everything its images reach), and that a dry run removes nothing.

use std::path::Path;
use std::process::{Command, Output};

use arena_image::{Digest, ImageRecord, LayerRecord, Lockfile, Store};

fn arenactl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_arenactl"))
        .args(args)
        .env("ARENA_CONFIG", "/dev/null")
        .output()
        .expect("run arenactl")
}

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// An image of `layers` in `store`, named `name`: its record.
fn image(store: &Store, name: &str, layers: &[&[u8]]) -> ImageRecord {
    let layers: Vec<LayerRecord> = layers
        .iter()
        .map(|l| LayerRecord {
            digest: store.put_bytes(l).unwrap(),
            diff_id: Digest::of_bytes(l),
            size: l.len() as u64,
            media_type: "application/vnd.oci.image.layer.v1.tar".into(),
        })
        .collect();
    let config = format!("{{\"name\":\"{name}\"}}");
    let config_digest = store.put_bytes(config.as_bytes()).unwrap();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "config": {"digest": config_digest.to_string(), "size": config.len()},
        "layers": layers.iter().map(|l| serde_json::json!({"digest": l.digest.to_string(), "size": l.size})).collect::<Vec<_>>(),
    })
    .to_string();
    let manifest_digest = store.put_bytes(manifest.as_bytes()).unwrap();
    store
        .set_ref(name, &manifest_digest, manifest.len() as u64)
        .unwrap();
    let rec = ImageRecord {
        name: name.into(),
        derivation: Digest::of_bytes(name.as_bytes()),
        base: "scratch".into(),
        task: Some(format!("t/{name}")),
        task_digest: None,
        layers,
        config: config_digest,
        config_size: config.len() as u64,
        manifest: manifest_digest,
        manifest_size: manifest.len() as u64,
    };
    store.record_derivation(&rec).unwrap();
    rec
}

fn blob_count(store: &Path) -> usize {
    std::fs::read_dir(store.join("blobs/sha256"))
        .unwrap()
        .count()
}

#[test]
fn ls_lists_what_the_store_holds_and_prune_keeps_what_a_lockfile_reaches() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let store = Store::open(&root).unwrap();
    let kept = image(&store, "kept", &[b"shared layer", b"kept layer"]);
    let gone = image(&store, "gone", &[b"shared layer", b"gone layer"]);
    store.put_bytes(b"a blob nothing names").unwrap();
    let lock_path = tmp.path().join("kept.lock");
    Lockfile {
        version: 1,
        set: "s".into(),
        sets: "sets.toml".into(),
        pins: Vec::new(),
        images: vec![kept.clone()],
    }
    .write(&lock_path)
    .unwrap();
    let (s, l) = (root.to_str().unwrap(), lock_path.to_str().unwrap());
    // shared, kept, gone layers; two configs, two manifests; the stray blob.
    assert_eq!(blob_count(&root), 8);

    let v = json(&arenactl(&[
        "image",
        "ls",
        "--store",
        s,
        "--image-lock",
        l,
        "--json",
    ]));
    let images = v["images"].as_array().unwrap();
    assert_eq!(images.len(), 2, "{v}");
    let entry = |name: &str| images.iter().find(|i| i["name"] == name).unwrap().clone();
    assert_eq!(entry("kept")["digest"], kept.manifest.to_string());
    assert_eq!(entry("kept")["locked"][0]["task"], "t/kept");
    assert_eq!(entry("gone")["locked"], serde_json::json!([]));
    let size =
        kept.manifest_size + kept.config_size + kept.layers.iter().map(|l| l.size).sum::<u64>();
    assert_eq!(entry("kept")["size"], size);
    assert_eq!(v["blobs"], 8);

    // A dry run says what would go and removes nothing.
    let v = json(&arenactl(&[
        "image",
        "prune",
        "--store",
        s,
        "--keep-lock",
        l,
        "--dry-run",
        "--json",
    ]));
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["removed_blobs"].as_array().unwrap().len(), 4, "{v}");
    assert_eq!(blob_count(&root), 8);

    let v = json(&arenactl(&[
        "image",
        "prune",
        "--store",
        s,
        "--keep-lock",
        l,
        "--json",
    ]));
    let removed: Vec<String> = v["removed_blobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect();
    assert!(
        removed.contains(&gone.manifest.to_string()) && removed.contains(&gone.config.to_string())
    );
    assert!(
        !removed.contains(&kept.layers[0].digest.to_string()),
        "a shared layer stays"
    );
    assert_eq!(v["removed_names"], serde_json::json!(["gone"]));
    assert_eq!(v["removed_build_records"], 1);
    assert!(v["freed_bytes"].as_u64().unwrap() > 0);
    assert_eq!(blob_count(&root), 4);
    for d in [
        &kept.manifest,
        &kept.config,
        &kept.layers[0].digest,
        &kept.layers[1].digest,
    ] {
        store.verify_blob(d, None).unwrap();
    }
    assert!(store.resolve_ref("gone").unwrap().is_none());
    assert!(store.lookup_derivation(&kept.derivation).is_some());
    assert!(store.lookup_derivation(&gone.derivation).is_none());

    // Without a lockfile to keep, nothing is pruned: that is a usage error.
    let o = arenactl(&["image", "prune", "--store", s]);
    assert_eq!(o.status.code(), Some(2));
    let o = arenactl(&[
        "image",
        "prune",
        "--store",
        s,
        "--keep-lock",
        "/nonexistent.lock",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--keep-lock /nonexistent.lock"));
    assert_eq!(blob_count(&root), 4);
}
