//! The content-addressed store. Its root is an OCI image layout (`oci-layout`, `index.json`,
//! `blobs/sha256/…`) that skopeo, umoci and containerd read as is, plus arena's derivation
//! records (`arena/derivations/<hash>.json`) that map a build's inputs to what it produced.
//! Blobs are written to `tmp/` and renamed into place, so a crash never leaves a partial blob
//! under its digest.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::canonical::canonical_json;
use crate::digest::{Digest, HashingReader};
use crate::error::{ImageError, Result};
use crate::record::ImageRecord;

pub const OCI_LAYOUT: &str = r#"{"imageLayoutVersion":"1.0.0"}"#;
pub const MEDIA_TYPE_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_TYPE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_TYPE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// A file's inode, size and mtime (seconds, nanoseconds): changed when the file is.
type FileIdentity = (u64, u64, i64, i64);

#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    /// Blobs this process has re-hashed and found good, with the file's identity then
    /// (inode, size, mtime): a lock or verify of a set whose tasks share one base hashes the
    /// base's layers once, not once per task, and a file changed since is hashed again.
    verified: Arc<Mutex<HashMap<Digest, FileIdentity>>>,
}

/// One entry of `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    #[serde(rename = "mediaType")]
    pub media_type: String,
    pub digest: Digest,
    pub size: u64,
    pub annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Index {
    #[serde(rename = "schemaVersion")]
    schema_version: u32,
    #[serde(rename = "mediaType")]
    media_type: String,
    manifests: Vec<IndexEntry>,
}

impl Store {
    /// `$ARENA_STORE`, else `$XDG_CACHE_HOME/arena/store`, else `~/.cache/arena/store`.
    pub fn default_root() -> PathBuf {
        if let Some(p) = std::env::var_os("ARENA_STORE") {
            return PathBuf::from(p);
        }
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(|| PathBuf::from(".cache"));
        cache.join("arena/store")
    }

    pub fn open(root: &Path) -> Result<Store> {
        for d in ["blobs/sha256", "tmp", "arena/derivations"] {
            std::fs::create_dir_all(root.join(d)).map_err(|e| ImageError::io(root.join(d), e))?;
        }
        let layout = root.join("oci-layout");
        if !layout.exists() {
            write_atomic(&layout, OCI_LAYOUT.as_bytes())?;
        }
        let index = root.join("index.json");
        if !index.exists() {
            write_index(&index, &[])?;
        }
        Ok(Store {
            root: root.to_path_buf(),
            verified: Arc::default(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(d.hex())
    }

    pub fn has_blob(&self, d: &Digest) -> bool {
        self.blob_path(d).is_file()
    }

    /// A new file in the store's staging directory (same filesystem as the blobs).
    pub fn staging_file(&self) -> Result<(PathBuf, std::fs::File)> {
        let dir = self.root.join("tmp");
        let f = tempfile::Builder::new()
            .prefix("blob-")
            .tempfile_in(&dir)
            .map_err(|e| ImageError::io(&dir, e))?;
        let (file, path) = f.keep().map_err(|e| ImageError::io(&dir, e.error))?;
        Ok((path, file))
    }

    /// Moves a staged file whose digest was computed while writing into its place.
    pub fn commit_staged(&self, staged: &Path, digest: &Digest) -> Result<()> {
        let dst = self.blob_path(digest);
        if dst.exists() {
            std::fs::remove_file(staged).map_err(|e| ImageError::io(staged, e))?;
            return Ok(());
        }
        // Blobs are content, readable by all (tempfile creates 0600).
        std::fs::set_permissions(staged, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| ImageError::io(staged, e))?;
        std::fs::rename(staged, &dst).map_err(|e| ImageError::io(&dst, e))
    }

    pub fn put_bytes(&self, data: &[u8]) -> Result<Digest> {
        let d = Digest::of_bytes(data);
        if !self.has_blob(&d) {
            let (path, mut f) = self.staging_file()?;
            f.write_all(data).map_err(|e| ImageError::io(&path, e))?;
            f.sync_all().map_err(|e| ImageError::io(&path, e))?;
            self.commit_staged(&path, &d)?;
        }
        Ok(d)
    }

    /// Opens a blob; a missing one is named by its digest.
    fn open_blob(&self, d: &Digest) -> Result<std::fs::File> {
        let p = self.blob_path(d);
        std::fs::File::open(&p).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ImageError::Missing {
                    path: self.root.clone(),
                    what: format!("blob {d}"),
                }
            } else {
                ImageError::io(&p, e)
            }
        })
    }

    pub fn read_blob(&self, d: &Digest) -> Result<Vec<u8>> {
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut self.open_blob(d)?, &mut data)
            .map_err(|e| ImageError::io(self.blob_path(d), e))?;
        let found = Digest::of_bytes(&data);
        if &found != d {
            return Err(ImageError::DigestMismatch {
                what: format!("blob {}", self.blob_path(d).display()),
                expected: d.to_string(),
                found: found.to_string(),
            });
        }
        Ok(data)
    }

    /// Re-hashes a blob and checks its size: the store is not trusted blindly. A blob this
    /// process already found good is not hashed again while its file is unchanged.
    pub fn verify_blob(&self, d: &Digest, size: Option<u64>) -> Result<()> {
        let p = self.blob_path(d);
        let f = self.open_blob(d)?;
        let identity = f.metadata().ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.ino(), m.len(), m.mtime(), m.mtime_nsec())
        });
        let seen = self
            .verified
            .lock()
            .map(|v| v.get(d).copied())
            .ok()
            .flatten();
        if identity.is_some()
            && seen == identity
            && size.is_none_or(|s| Some(s) == identity.map(|i| i.1))
        {
            return Ok(());
        }
        let mut r = HashingReader::new(std::io::BufReader::with_capacity(1 << 20, f));
        std::io::copy(&mut r, &mut std::io::sink()).map_err(|e| ImageError::io(&p, e))?;
        let (found, n) = r.finish();
        if &found != d {
            return Err(ImageError::DigestMismatch {
                what: format!("blob {}", p.display()),
                expected: d.to_string(),
                found: found.to_string(),
            });
        }
        if let Some(s) = size {
            if s != n {
                return Err(ImageError::SizeMismatch {
                    what: format!("blob {d}"),
                    expected: s,
                    found: n,
                });
            }
        }
        if let (Some(id), Ok(mut v)) = (identity, self.verified.lock()) {
            v.insert(d.clone(), id);
        }
        Ok(())
    }

    fn derivation_path(&self, drv: &Digest) -> PathBuf {
        self.root
            .join("arena/derivations")
            .join(format!("{}.json", drv.hex()))
    }

    /// The image a derivation produced, if it was built here and all its blobs are present.
    pub fn lookup_derivation(&self, drv: &Digest) -> Option<ImageRecord> {
        let text = std::fs::read(self.derivation_path(drv)).ok()?;
        let rec: ImageRecord = serde_json::from_slice(&text).ok()?;
        let complete = self.has_blob(&rec.manifest)
            && self.has_blob(&rec.config)
            && rec.layers.iter().all(|l| self.has_blob(&l.digest));
        complete.then_some(rec)
    }

    pub fn record_derivation(&self, rec: &ImageRecord) -> Result<()> {
        write_atomic(
            &self.derivation_path(&rec.derivation),
            &serde_json::to_vec_pretty(rec)
                .map_err(|e| ImageError::invalid("record", e.to_string()))?,
        )
    }

    pub fn index_entries(&self) -> Result<Vec<IndexEntry>> {
        let p = self.root.join("index.json");
        let text = std::fs::read(&p).map_err(|e| ImageError::io(&p, e))?;
        let idx: Index = serde_json::from_slice(&text)
            .map_err(|e| ImageError::invalid(p.display().to_string(), e.to_string()))?;
        Ok(idx.manifests)
    }

    /// Points `name` at a manifest in `index.json` (replacing an older entry of that name).
    pub fn set_ref(&self, name: &str, manifest: &Digest, size: u64) -> Result<()> {
        let mut entries = self.index_entries()?;
        // Already so (every image of an unchanged re-lock): no write. Rewriting and syncing
        // the whole index per image made a re-lock of N tasks O(N²) (ci/bench/relock.sh).
        let named = |e: &IndexEntry| e.annotations.get(REF_NAME).map(String::as_str) == Some(name);
        if entries
            .iter()
            .any(|e| named(e) && &e.digest == manifest && e.size == size)
        {
            return Ok(());
        }
        entries.retain(|e| !named(e));
        entries.push(IndexEntry {
            media_type: MEDIA_TYPE_MANIFEST.to_string(),
            digest: manifest.clone(),
            size,
            annotations: [(REF_NAME.to_string(), name.to_string())].into(),
        });
        write_index(&self.root.join("index.json"), &entries)
    }

    /// Finds a manifest by ref name.
    pub fn resolve_ref(&self, name: &str) -> Result<Option<IndexEntry>> {
        Ok(self
            .index_entries()?
            .into_iter()
            .find(|e| e.annotations.get(REF_NAME).map(String::as_str) == Some(name)))
    }
}

/// Writes `index.json` with entries sorted by ref name, then digest.
pub fn write_index(path: &Path, entries: &[IndexEntry]) -> Result<()> {
    let mut manifests = entries.to_vec();
    manifests.sort_by(|a, b| {
        (a.annotations.get(REF_NAME), &a.digest).cmp(&(b.annotations.get(REF_NAME), &b.digest))
    });
    let idx = Index {
        schema_version: 2,
        media_type: MEDIA_TYPE_INDEX.to_string(),
        manifests,
    };
    write_atomic(path, &canonical_json(&idx)?)
}

/// Write to a temporary file beside `path`, fsync, rename: readers see the old or the new file.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| ImageError::io(dir, e))?;
    // Readable by everyone, as a file written by hand would be (a lockfile is shared).
    let mut f = tempfile::Builder::new()
        .prefix(".tmp-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(|e| ImageError::io(dir, e))?;
    f.write_all(data).map_err(|e| ImageError::io(path, e))?;
    f.as_file()
        .sync_all()
        .map_err(|e| ImageError::io(path, e))?;
    f.persist(path).map_err(|e| ImageError::io(path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_is_hashed_again_once_its_file_changed() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let digest = store.put_bytes(b"hello blob").unwrap();
        store.verify_blob(&digest, Some(10)).unwrap();
        // Remembered: a second check of the unchanged file is free, in a clone too.
        store.clone().verify_blob(&digest, Some(10)).unwrap();
        assert!(
            store.verify_blob(&digest, Some(11)).is_err(),
            "size still checked"
        );
        // The same length, other bytes, a later mtime: hashed again and refused.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let p = store.blob_path(&digest);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&p, b"hello BLOB").unwrap();
        let e = store
            .verify_blob(&digest, Some(10))
            .unwrap_err()
            .to_string();
        assert!(e.contains("digest mismatch"), "{e}");
    }

    #[test]
    fn a_ref_set_again_unchanged_leaves_the_index_as_it_is_and_a_changed_one_moves() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let a = store.put_bytes(b"manifest a").unwrap();
        let b = store.put_bytes(b"manifest b").unwrap();
        store.set_ref("x", &a, 10).unwrap();
        let inode = || {
            std::fs::metadata(d.path().join("index.json"))
                .unwrap()
                .ino()
        };
        let before = inode();
        // Unchanged: not rewritten (a rewrite is a new file renamed over the old one).
        store.set_ref("x", &a, 10).unwrap();
        assert_eq!(inode(), before);
        // Another size or digest under the name: rewritten, and the name moves.
        store.set_ref("x", &a, 11).unwrap();
        assert_ne!(inode(), before);
        store.set_ref("x", &b, 10).unwrap();
        let e = store.resolve_ref("x").unwrap().unwrap();
        assert_eq!((e.digest, e.size), (b, 10));
        assert_eq!(store.index_entries().unwrap().len(), 1);
    }
}
