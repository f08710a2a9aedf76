//! Air-gap bundles: one tar holding an OCI image layout with every image of a lockfile (each
//! blob once, with the manifest and config of a registry base the images build on, which the
//! lab's verify reads) plus the lockfile itself. Import checks every blob's sha256 while it
//! streams it into a private staging directory, then every manifest, config and layer against
//! the lock; only then are blobs moved into the store and names added, so a corrupted or
//! truncated bundle leaves nothing visible.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use oci_spec::image::ImageManifest;

use crate::canonical::canonical_json;
use crate::digest::{Digest, HashingReader, HashingWriter};
use crate::error::{ImageError, Result};
use crate::lock::Lockfile;
use crate::progress::Progress;
use crate::record::ImageRecord;
use crate::store::{write_atomic, IndexEntry, Store, MEDIA_TYPE_MANIFEST, OCI_LAYOUT, REF_NAME};

pub const BUNDLE_LOCK: &str = "arena.lock";

/// Every blob an image needs, with its size.
fn blobs_of(rec: &ImageRecord) -> Vec<(Digest, u64)> {
    let mut v = vec![
        (rec.manifest.clone(), rec.manifest_size),
        (rec.config.clone(), rec.config_size),
    ];
    v.extend(rec.layers.iter().map(|l| (l.digest.clone(), l.size)));
    v
}

/// The blobs of the bases the lock's images build on that are not themselves locked images
/// (a registry base pinned by digest): its manifest and config, which a build in the lab reads
/// from the store (its layers are the images' own first layers).
fn external_base_blobs(store: &Store, lock: &Lockfile) -> Result<Vec<(Digest, u64)>> {
    let mut out = Vec::new();
    for i in &lock.images {
        if i.base == "scratch" || lock.images.iter().any(|o| o.manifest.to_string() == i.base) {
            continue;
        }
        let d = Digest::parse(&i.base)?;
        let bytes = store.read_blob(&d)?;
        let m: ImageManifest = serde_json::from_slice(&bytes).map_err(|e| {
            ImageError::invalid(format!("base manifest {d} of {}", i.name), e.to_string())
        })?;
        out.push((d, bytes.len() as u64));
        out.push((
            Digest::parse(m.config().digest().as_ref())?,
            m.config().size(),
        ));
        for l in m.layers() {
            out.push((Digest::parse(l.digest().as_ref())?, l.size()));
        }
    }
    Ok(out)
}

/// A tar header of a regular file of `size` bytes as arena writes archives: mode 0644, owner
/// 0, mtime 0 (the bytes of an archive depend on its contents alone).
pub fn header(size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h.set_size(size);
    h
}

fn index_json(lock: &Lockfile) -> Result<Vec<u8>> {
    let mut entries: Vec<IndexEntry> = lock
        .images
        .iter()
        .map(|i| IndexEntry {
            media_type: MEDIA_TYPE_MANIFEST.into(),
            digest: i.manifest.clone(),
            size: i.manifest_size,
            annotations: [(REF_NAME.to_string(), i.name.clone())].into(),
        })
        .collect();
    entries.sort_by(|a, b| {
        a.annotations
            .get(REF_NAME)
            .cmp(&b.annotations.get(REF_NAME))
    });
    canonical_json(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": crate::store::MEDIA_TYPE_INDEX,
        "manifests": entries,
    }))
}

/// Writes the bundle of `lockfile`'s images to `out` (atomically). Returns the blob count.
pub fn export(
    store: &Store,
    lockfile: &Path,
    out: &Path,
    progress: &dyn Progress,
) -> Result<usize> {
    let lock_bytes = std::fs::read(lockfile).map_err(|e| ImageError::io(lockfile, e))?;
    let lock = Lockfile::load(lockfile)?;
    let mut blobs: BTreeMap<Digest, u64> = BTreeMap::new();
    for i in &lock.images {
        for (d, s) in blobs_of(i) {
            blobs.insert(d, s);
        }
    }
    for (d, s) in external_base_blobs(store, &lock)? {
        blobs.insert(d, s);
    }
    for d in blobs.keys() {
        if !store.has_blob(d) {
            return Err(ImageError::Missing {
                path: store.root().to_path_buf(),
                what: format!(
                    "blob {d} of {} (build it first: arenactl lock)",
                    lockfile.display()
                ),
            });
        }
    }
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".bundle-")
        .tempfile_in(dir)
        .map_err(|e| ImageError::io(dir, e))?;
    let total: u64 = blobs.values().sum();
    progress.phase("exporting", Some(total));
    let mut b = tar::Builder::new(std::io::BufWriter::with_capacity(1 << 20, tmp.as_file()));
    let io = |e| ImageError::io(out, e);
    let index = index_json(&lock)?;
    for (name, data) in [
        ("oci-layout", OCI_LAYOUT.as_bytes()),
        ("index.json", &index[..]),
        (BUNDLE_LOCK, &lock_bytes[..]),
    ] {
        b.append_data(&mut header(data.len() as u64), name, data)
            .map_err(io)?;
    }
    for (d, size) in &blobs {
        let path = store.blob_path(d);
        let f = std::fs::File::open(&path).map_err(|e| ImageError::io(&path, e))?;
        let mut r = HashingReader::new(Counted {
            inner: f.take(*size),
            progress,
        });
        b.append_data(
            &mut header(*size),
            format!("blobs/sha256/{}", d.hex()),
            &mut r,
        )
        .map_err(|e| ImageError::io(&path, e))?;
        let (found, n) = r.finish();
        if &found != d || n != *size {
            progress.finish_phase();
            return Err(ImageError::DigestMismatch {
                what: format!("stored blob {} ({n} bytes)", path.display()),
                expected: d.to_string(),
                found: found.to_string(),
            });
        }
    }
    b.into_inner()
        .map_err(io)?
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(out).map_err(|e| ImageError::io(out, e.error))?;
    progress.finish_phase();
    Ok(blobs.len())
}

/// A reader that reports the bytes read through it to a progress bar.
pub struct Counted<'a, R> {
    pub inner: R,
    pub progress: &'a dyn Progress,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

/// What an import accepted.
#[derive(Debug, Clone)]
pub struct Imported {
    pub lock: Lockfile,
    pub lock_bytes: Vec<u8>,
    pub blobs: usize,
    pub new_blobs: usize,
}

fn corrupt(bundle: &Path, message: String) -> ImageError {
    ImageError::Archive {
        path: bundle.to_path_buf(),
        message,
    }
}

/// Imports a bundle into the store, verifying everything before anything becomes visible.
pub fn import(store: &Store, bundle: &Path, progress: &dyn Progress) -> Result<Imported> {
    let staging = tempfile::Builder::new()
        .prefix("import-")
        .tempdir_in(store.root().join("tmp"))
        .map_err(|e| ImageError::io(store.root().join("tmp"), e))?;
    let f = std::fs::File::open(bundle).map_err(|e| ImageError::io(bundle, e))?;
    let total = f.metadata().map_err(|e| ImageError::io(bundle, e))?.len();
    progress.phase("importing", Some(total));
    let result = stage(staging.path(), bundle, f, progress);
    progress.finish_phase();
    let (lock_bytes, staged) = result?;
    let lock_text = String::from_utf8(lock_bytes.clone())
        .map_err(|_| corrupt(bundle, format!("{BUNDLE_LOCK} is not UTF-8")))?;
    let lock: Lockfile = toml::from_str(&lock_text)
        .map_err(|e| corrupt(bundle, format!("{BUNDLE_LOCK}: {}", e.message())))?;

    // Every blob the lock names must be here (or already in the store), with the right size,
    // and every manifest must describe exactly the config and layers the lock pins.
    let have = |d: &Digest| -> Option<PathBuf> {
        if let Some(p) = staged.get(d) {
            return Some(p.0.clone());
        }
        store.has_blob(d).then(|| store.blob_path(d))
    };
    for img in &lock.images {
        for (d, size) in blobs_of(img) {
            let path = have(&d).ok_or_else(|| {
                corrupt(bundle, format!("blob {d} of image {} is missing", img.name))
            })?;
            let n = std::fs::metadata(&path)
                .map_err(|e| ImageError::io(&path, e))?
                .len();
            if n != size {
                return Err(ImageError::SizeMismatch {
                    what: format!("blob {d} of image {} in {}", img.name, bundle.display()),
                    expected: size,
                    found: n,
                });
            }
        }
        let mpath = have(&img.manifest).expect("checked above");
        let mbytes = std::fs::read(&mpath).map_err(|e| ImageError::io(&mpath, e))?;
        let m: ImageManifest = serde_json::from_slice(&mbytes).map_err(|e| {
            corrupt(
                bundle,
                format!("manifest {} of image {}: {e}", img.manifest, img.name),
            )
        })?;
        let described: Vec<(String, u64)> = std::iter::once(m.config())
            .chain(m.layers().iter())
            .map(|d| (d.digest().to_string(), d.size()))
            .collect();
        let locked: Vec<(String, u64)> = std::iter::once((img.config.to_string(), img.config_size))
            .chain(img.layers.iter().map(|l| (l.digest.to_string(), l.size)))
            .collect();
        if described != locked {
            return Err(corrupt(
                bundle,
                format!(
                    "manifest {} of image {} does not match the lock's config and layers",
                    img.manifest, img.name
                ),
            ));
        }
    }

    // Accept: move blobs in, then names and derivation records.
    let mut new_blobs = 0;
    for (d, (path, _)) in &staged {
        if !store.has_blob(d) {
            store.commit_staged(path, d)?;
            new_blobs += 1;
        }
    }
    for img in &lock.images {
        store.set_ref(&img.name, &img.manifest, img.manifest_size)?;
        store.record_derivation(img)?;
    }
    Ok(Imported {
        blobs: staged.len(),
        new_blobs,
        lock,
        lock_bytes,
    })
}

type Staged = BTreeMap<Digest, (PathBuf, u64)>;

/// Streams the bundle's entries into `dir`, checking each blob against its name.
fn stage(
    dir: &Path,
    bundle: &Path,
    f: std::fs::File,
    progress: &dyn Progress,
) -> Result<(Vec<u8>, Staged)> {
    let mut ar = tar::Archive::new(Counted {
        inner: std::io::BufReader::with_capacity(1 << 20, f),
        progress,
    });
    let mut lock = None;
    let mut layout_ok = false;
    let mut staged = Staged::new();
    let entries = ar.entries().map_err(|e| ImageError::io(bundle, e))?;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| corrupt(bundle, format!("unreadable (truncated?) entry: {e}")))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let name = name.trim_start_matches("./").to_string();
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        match name.as_str() {
            "oci-layout" | "index.json" | BUNDLE_LOCK => {
                let mut buf = Vec::new();
                entry
                    .read_to_end(&mut buf)
                    .map_err(|e| corrupt(bundle, format!("{name} is truncated: {e}")))?;
                if name == BUNDLE_LOCK {
                    lock = Some(buf);
                } else if name == "oci-layout" {
                    layout_ok = serde_json::from_slice::<serde_json::Value>(&buf)
                        .map(|v| v["imageLayoutVersion"] == "1.0.0")
                        .unwrap_or(false);
                }
            }
            other => {
                let hex = other
                    .strip_prefix("blobs/sha256/")
                    .ok_or_else(|| corrupt(bundle, format!("unexpected entry `{other}`")))?;
                let d = Digest::parse(&format!("sha256:{hex}")).map_err(|_| {
                    corrupt(
                        bundle,
                        format!("entry `{other}` is not named by a sha256 digest"),
                    )
                })?;
                let declared = entry.size();
                let path = dir.join(hex);
                let file = std::fs::File::create(&path).map_err(|e| ImageError::io(&path, e))?;
                let mut w = HashingWriter::new(std::io::BufWriter::new(file));
                std::io::copy(&mut entry, &mut w)
                    .map_err(|e| corrupt(bundle, format!("blob {d} is truncated: {e}")))?;
                let (bw, found, n) = w.into_parts();
                bw.into_inner()
                    .map_err(|e| ImageError::io(&path, e.into_error()))?
                    .sync_all()
                    .map_err(|e| ImageError::io(&path, e))?;
                if n != declared {
                    return Err(corrupt(
                        bundle,
                        format!("blob {d} is truncated: {n} of {declared} bytes"),
                    ));
                }
                if found != d {
                    return Err(ImageError::DigestMismatch {
                        what: format!("blob {d} in {} (corrupted)", bundle.display()),
                        expected: d.to_string(),
                        found: found.to_string(),
                    });
                }
                staged.insert(d, (path, n));
            }
        }
    }
    if !layout_ok {
        return Err(corrupt(
            bundle,
            "no valid oci-layout file: not an arena bundle".into(),
        ));
    }
    let lock =
        lock.ok_or_else(|| corrupt(bundle, format!("no {BUNDLE_LOCK}: not an arena bundle")))?;
    Ok((lock, staged))
}

/// Writes the bundle's lockfile to `path`.
pub fn save_lock(imported: &Imported, path: &Path) -> Result<()> {
    write_atomic(path, &imported.lock_bytes)
}
