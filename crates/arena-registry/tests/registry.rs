//! arena-registry against a real registry (Debian's docker-registry on 127.0.0.1): push an
//! image arena built, resolve and pull it back into an empty store with the same digests; and
//! every way a pull can fail — wrong digest, corrupted or truncated blob, 401, 404, registry
//! down, connection cut mid-blob — ends in an error that says which, with nothing of the
//! failed pull in the store.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arena_image::base::base_from_store;
use arena_image::{
    build, BuildContext, Digest, ImageRecord, ImageSpec, LoadedRecipe, NoProgress, Store,
};
use arena_registry::testing::{CuttingRelay, LocalRegistry};
use arena_registry::{Registry, RegistryConfig, RegistryError};

/// Builds a small image (two layers; the second 3 MiB of incompressible bytes, so a relay can
/// cut a blob in the middle) into a new store.
fn built_image(dir: &Path) -> (Store, ImageRecord) {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("etc")).unwrap();
    std::fs::write(src.join("etc/hello"), "hello from arena\n").unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..3 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(dir.join("noise.bin"), noise).unwrap();
    let recipe = dir.join("regtest.toml");
    std::fs::write(
        &recipe,
        "name = \"regtest\"\n[base]\nkind = \"scratch\"\n\n[[layer]]\nkind = \"directory\"\npath = \"src\"\n\n[[layer]]\nkind = \"file\"\npath = \"noise.bin\"\ntarget = \"/opt/noise.bin\"\n",
    )
    .unwrap();
    let store = Store::open(&dir.join("store")).unwrap();
    let ctx = BuildContext::new(&store, None, &NoProgress);
    let spec = ImageSpec::from_recipe(&LoadedRecipe::load(&recipe).unwrap()).unwrap();
    let (rec, _) = build(&ctx, &spec).unwrap();
    (store, rec)
}

/// An empty credentials file: no docker config of this machine's may leak into a test.
fn no_credentials() -> Option<PathBuf> {
    // Written once: tests run in parallel, and a rewrite would let another read it half-made.
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("config.json"), r#"{"auths": {}}"#).unwrap();
        d
    });
    Some(dir.path().join("config.json"))
}

fn registry() -> Registry {
    Registry::new(RegistryConfig {
        auth_file: no_credentials(),
        ..Default::default()
    })
    .unwrap()
}

fn with_auth_file(dir: &Path, host: &str, user: &str, password: &str) -> Registry {
    // Named by a counter, not the password: an error message names the file.
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let f = dir.join(format!("auth-{user}-{n}.json"));
    std::fs::write(
        &f,
        format!(r#"{{"auths": {{"{host}": {{"username": "{user}", "password": "{password}"}}}}}}"#),
    )
    .unwrap();
    Registry::new(RegistryConfig {
        auth_file: Some(f),
        ..Default::default()
    })
    .unwrap()
}

/// Everything in a store's blob and staging directories.
fn store_files(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    for sub in ["blobs/sha256", "tmp"] {
        if let Ok(rd) = std::fs::read_dir(store.root().join(sub)) {
            out.extend(
                rd.flatten()
                    .map(|e| format!("{sub}/{}", e.file_name().to_string_lossy())),
            );
        }
    }
    out.sort();
    out
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

#[test]
fn an_image_pushed_and_pulled_back_keeps_every_digest() {
    let d = tempfile::tempdir().unwrap();
    let (store, rec) = built_image(d.path());
    let reg = LocalRegistry::start(None);
    let r = registry();
    let rt = rt();
    let tag = format!("{}/arena/regtest:v1", reg.host);
    let pushed = rt
        .block_on(r.push(&store, &rec.manifest, &tag, &NoProgress))
        .unwrap();
    assert_eq!(pushed.manifest, rec.manifest);
    assert_eq!(pushed.pushed_blobs, 3, "config and two layers");
    assert_eq!(
        pushed.reference,
        format!("{}/arena/regtest@{}", reg.host, rec.manifest)
    );
    // Again: the registry has every blob; the manifest is the same bytes.
    let again = rt
        .block_on(r.push(&store, &rec.manifest, &tag, &NoProgress))
        .unwrap();
    assert_eq!((again.pushed_blobs, again.present_blobs), (0, 3));

    // The tag resolves to the pin; a pull into an empty store gives the same image.
    let resolved = rt.block_on(r.resolve(&tag)).unwrap();
    assert_eq!(resolved.manifest, rec.manifest);
    assert_eq!(resolved.reference, pushed.reference);
    let empty = Store::open(&d.path().join("empty")).unwrap();
    let pulled = rt.block_on(r.pull(&tag, &empty, &NoProgress)).unwrap();
    assert_eq!(pulled.resolved.manifest, rec.manifest);
    assert_eq!(pulled.fetched_blobs, 3);
    let base = base_from_store(&empty, &rec.manifest).unwrap();
    assert_eq!(base.layers, rec.layers);
    for l in &rec.layers {
        assert_eq!(
            std::fs::read(empty.blob_path(&l.digest)).unwrap(),
            std::fs::read(store.blob_path(&l.digest)).unwrap()
        );
    }
    // By digest, a second time: nothing fetched.
    let by_digest = rt
        .block_on(r.pull(&pulled.resolved.reference, &empty, &NoProgress))
        .unwrap();
    assert_eq!((by_digest.fetched_blobs, by_digest.present_blobs), (0, 3));
    assert_eq!(
        empty
            .resolve_ref(&pulled.resolved.reference)
            .unwrap()
            .unwrap()
            .digest,
        rec.manifest
    );
}

#[test]
fn a_multi_platform_index_is_resolved_to_the_configured_platform() {
    let d = tempfile::tempdir().unwrap();
    let (store, rec) = built_image(d.path());
    let reg = LocalRegistry::start(None);
    let rt = rt();
    let repo = format!("{}/arena/multi", reg.host);
    rt.block_on(registry().push(&store, &rec.manifest, &format!("{repo}:amd64"), &NoProgress))
        .unwrap();
    // A second manifest for arm64: the same blobs, one annotation more.
    let mut other: serde_json::Value =
        serde_json::from_slice(&store.read_blob(&rec.manifest).unwrap()).unwrap();
    other["annotations"] = serde_json::json!({"arena.test": "arm64"});
    let other = serde_json::to_vec(&other).unwrap();
    let other_digest = Digest::of_bytes(&other);
    let client = oci_client::Client::new(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::Http,
        ..Default::default()
    });
    let push_raw = |tag: &str, bytes: Vec<u8>, media_type: &str| {
        let r: oci_client::Reference = format!("{repo}:{tag}").parse().unwrap();
        rt.block_on(client.push_manifest_raw(&r, bytes, media_type.parse().unwrap()))
            .unwrap();
    };
    push_raw(
        "arm64",
        other.clone(),
        "application/vnd.oci.image.manifest.v1+json",
    );
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": other_digest.to_string(), "size": other.len(),
             "platform": {"os": "linux", "architecture": "arm64"}},
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": rec.manifest.to_string(), "size": rec.manifest_size,
             "platform": {"os": "linux", "architecture": "amd64"}},
        ]
    });
    let bytes = serde_json::to_vec(&index).unwrap();
    let index_digest = Digest::of_bytes(&bytes);
    push_raw("multi", bytes, "application/vnd.oci.image.index.v1+json");
    let res = rt
        .block_on(registry().resolve(&format!("{repo}:multi")))
        .unwrap();
    assert_eq!(res.manifest, rec.manifest);
    assert_eq!(res.index, Some(index_digest));
    assert_eq!(res.reference, format!("{repo}@{}", rec.manifest));
    let arm = Registry::new(RegistryConfig {
        architecture: Some("arm64".into()),
        auth_file: no_credentials(),
        ..Default::default()
    })
    .unwrap();
    let res = rt.block_on(arm.resolve(&format!("{repo}:multi"))).unwrap();
    assert_eq!(res.manifest, other_digest);
    // A platform the index lacks is named with the ones it has.
    let riscv = Registry::new(RegistryConfig {
        architecture: Some("riscv64".into()),
        auth_file: no_credentials(),
        ..Default::default()
    })
    .unwrap();
    let e = rt
        .block_on(riscv.resolve(&format!("{repo}:multi")))
        .unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, RegistryError::NotFound { .. }), "{m}");
    assert!(
        m.contains("linux/riscv64") && m.contains("linux/arm64, linux/amd64"),
        "{m}"
    );
}

#[test]
fn every_failed_pull_says_why_and_leaves_nothing_in_the_store() {
    let d = tempfile::tempdir().unwrap();
    let (store, rec) = built_image(d.path());
    let reg = LocalRegistry::start(None);
    let r = registry();
    let rt = rt();
    let tag = format!("{}/arena/regtest:v1", reg.host);
    rt.block_on(r.push(&store, &rec.manifest, &tag, &NoProgress))
        .unwrap();
    let fresh = |name: &str| Store::open(&d.path().join(name)).unwrap();

    // A digest the registry does not have.
    let s = fresh("wrong-digest");
    let wrong = format!("{}/arena/regtest@sha256:{}", reg.host, "ab".repeat(32));
    let e = rt.block_on(r.pull(&wrong, &s, &NoProgress)).unwrap_err();
    assert!(matches!(e, RegistryError::NotFound { .. }), "{e}");
    assert!(e.to_string().contains(&"ab".repeat(32)), "{e}");
    assert!(store_files(&s).is_empty(), "{:?}", store_files(&s));

    // A repository and a tag that do not exist.
    for missing in [
        format!("{}/arena/nothing:v1", reg.host),
        format!("{}/arena/regtest:v2", reg.host),
    ] {
        let e = rt.block_on(r.pull(&missing, &s, &NoProgress)).unwrap_err();
        assert!(
            matches!(e, RegistryError::NotFound { .. }),
            "{missing}: {e}"
        );
    }

    // No registry at all.
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let e = rt
        .block_on(r.pull(&format!("{down}/arena/regtest:v1"), &s, &NoProgress))
        .unwrap_err();
    assert!(matches!(e, RegistryError::Unreachable { .. }), "{e}");
    assert!(e.to_string().contains(&down), "{e}");

    // The connection cut 1 MiB into the 3 MiB layer: the partial blob is discarded.
    let relay = CuttingRelay::start(&reg.host, 1 << 20);
    let s = fresh("cut");
    let e = rt
        .block_on(r.pull(&format!("{}/arena/regtest:v1", relay.host), &s, &NoProgress))
        .unwrap_err();
    let m = e.to_string();
    assert!(
        matches!(e, RegistryError::Unreachable { .. }) && m.contains("broke off"),
        "{m}"
    );
    assert!(
        store_files(&s).iter().all(|f| !f.starts_with("tmp/")),
        "{:?}",
        store_files(&s)
    );
    assert!(!s.has_blob(&rec.manifest), "a manifest without its blobs");
    assert!(!s.has_blob(&rec.layers[1].digest));

    // The big layer's bytes changed in the registry's storage (same length), then cut short.
    let big = &rec.layers[1].digest;
    let file = reg.blob_file(big.hex());
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[1000] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let s = fresh("corrupt");
    let e = rt.block_on(r.pull(&tag, &s, &NoProgress)).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, RegistryError::DigestMismatch { .. }), "{m}");
    assert!(m.contains(&big.to_string()), "{m}");
    assert!(!s.has_blob(big) && !s.has_blob(&rec.manifest));
    assert!(store_files(&s).iter().all(|f| !f.starts_with("tmp/")));
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let s = fresh("truncated");
    let e = rt.block_on(r.pull(&tag, &s, &NoProgress)).unwrap_err();
    assert!(
        matches!(
            e,
            RegistryError::SizeMismatch { .. }
                | RegistryError::Unreachable { .. }
                | RegistryError::Protocol { .. }
        ),
        "{e}"
    );
    assert!(!s.has_blob(big) && !s.has_blob(&rec.manifest), "{e}");
    assert!(store_files(&s).iter().all(|f| !f.starts_with("tmp/")));
}

#[test]
fn a_registry_with_basic_auth_refuses_anonymous_and_wrong_credentials() {
    let d = tempfile::tempdir().unwrap();
    let (store, rec) = built_image(d.path());
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let reg = LocalRegistry::start(Some(&format!("arena:{hash}\n")));
    let rt = rt();
    let tag = format!("{}/arena/private:v1", reg.host);

    let e = rt
        .block_on(registry().push(&store, &rec.manifest, &tag, &NoProgress))
        .unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, RegistryError::Unauthorized { .. }), "{m}");
    assert!(m.contains("anonymous"), "{m}");

    let wrong = with_auth_file(d.path(), &reg.host, "arena", "guess");
    let e = rt.block_on(wrong.resolve(&tag)).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, RegistryError::Unauthorized { .. }), "{m}");
    assert!(m.contains("user `arena`") && !m.contains("guess"), "{m}");

    let right = with_auth_file(d.path(), &reg.host, "arena", "s3cret");
    rt.block_on(right.push(&store, &rec.manifest, &tag, &NoProgress))
        .unwrap();
    let s = Store::open(&d.path().join("pulled")).unwrap();
    let p = rt.block_on(right.pull(&tag, &s, &NoProgress)).unwrap();
    assert_eq!(p.resolved.manifest, rec.manifest);
    let e = rt
        .block_on(registry().pull(
            &tag,
            &Store::open(&d.path().join("anon")).unwrap(),
            &NoProgress,
        ))
        .unwrap_err();
    assert!(matches!(e, RegistryError::Unauthorized { .. }), "{e}");
}

#[test]
fn a_store_blob_changed_on_disk_is_not_published_under_its_name() {
    let d = tempfile::tempdir().unwrap();
    let (store, rec) = built_image(d.path());
    let reg = LocalRegistry::start(None);
    let rt = rt();
    let big = &rec.layers[1].digest;
    let path = store.blob_path(big);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[4242] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let tag = format!("{}/arena/tampered:v1", reg.host);
    let e = rt
        .block_on(registry().push(&store, &rec.manifest, &tag, &NoProgress))
        .unwrap_err();
    assert!(e.to_string().contains(big.as_str()), "{e}");
    // Neither the blob nor the tag exists in the registry.
    assert!(!reg.blob_file(big.hex()).exists());
    let e = rt.block_on(registry().resolve(&tag)).unwrap_err();
    assert!(matches!(e, RegistryError::NotFound { .. }), "{e}");
}
