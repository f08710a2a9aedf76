//! Digests of build inputs, for the derivation hash. File contents are hashed once and then
//! remembered by (path, size, mtime, ctime, inode), as git's index does, so a rebuild with
//! nothing changed stats files instead of reading them.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::layer::tree::{Content, EntryKind, LayerTree};
use crate::store::write_atomic;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    dev: u64,
    sha256: String,
}

/// Remembered file hashes, kept in the store (`arena/file-hashes.json`).
pub struct HashCache {
    path: Option<PathBuf>,
    map: Mutex<HashMap<String, Stamp>>,
    dirty: Mutex<bool>,
}

impl HashCache {
    pub fn in_memory() -> HashCache {
        HashCache {
            path: None,
            map: Mutex::new(HashMap::new()),
            dirty: Mutex::new(false),
        }
    }

    pub fn load(path: PathBuf) -> HashCache {
        let map = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        HashCache {
            path: Some(path),
            map: Mutex::new(map),
            dirty: Mutex::new(false),
        }
    }

    pub fn save(&self) -> Result<()> {
        let (Some(path), true) = (&self.path, *self.dirty.lock().unwrap()) else {
            return Ok(());
        };
        let map = self.map.lock().unwrap();
        let data = serde_json::to_vec(&*map)
            .map_err(|e| ImageError::invalid("hash cache", e.to_string()))?;
        write_atomic(path, &data)
    }

    /// sha256 (hex) of a file's contents, from the cache when its stat is unchanged.
    pub fn file_sha256(&self, path: &Path) -> Result<String> {
        let meta = std::fs::metadata(path).map_err(|e| ImageError::io(path, e))?;
        let key = path.to_string_lossy().into_owned();
        let stamp = |sha256: String| Stamp {
            size: meta.len(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            ctime_ns: meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128,
            ino: meta.ino(),
            dev: meta.dev(),
            sha256,
        };
        if let Some(s) = self.map.lock().unwrap().get(&key) {
            if *s == stamp(s.sha256.clone()) {
                return Ok(s.sha256.clone());
            }
        }
        let (d, _) = Digest::of_file(path).map_err(|e| ImageError::io(path, e))?;
        let hex = d.hex().to_string();
        self.map.lock().unwrap().insert(key, stamp(hex.clone()));
        *self.dirty.lock().unwrap() = true;
        Ok(hex)
    }
}

/// The content hash of every file entry read from disk, in tree order, hashed on every core:
/// a cold build reads the whole tree here once before it writes the layer, and one core
/// hashing alone is a serial phase as long as a third of the layer's write.
fn path_hashes(tree: &LayerTree, cache: &HashCache) -> Result<Vec<String>> {
    let paths: Vec<&Path> = tree
        .entries()
        .filter_map(|e| match &e.kind {
            EntryKind::File {
                content: Content::Path(p),
                ..
            } => Some(p.as_path()),
            _ => None,
        })
        .collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len().max(1));
    let next = AtomicUsize::new(0);
    let mut found: Vec<(usize, Result<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(p) = paths.get(i) else { break mine };
                        mine.push((i, cache.file_sha256(p)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a file-hashing worker panicked"))
            .collect()
    });
    // In tree order, so an unreadable tree fails on its first bad file whatever the timing.
    found.sort_by_key(|(i, _)| *i);
    found.into_iter().map(|(_, r)| r).collect()
}

/// Digest of a layer tree's full content: every entry's path, kind, mode, owner, link target
/// and content hash, in tree order. Two trees with this digest produce the same layer.
pub fn tree_digest(tree: &LayerTree, cache: &HashCache) -> Result<Digest> {
    let mut from_disk = path_hashes(tree, cache)?.into_iter();
    let mut h = Sha256::new();
    h.update(b"arena.layer-tree.v1\n");
    let put = |h: &mut Sha256, b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    for e in tree.entries() {
        let (tag, extra): (&[u8], String) = match &e.kind {
            EntryKind::Dir => (b"d", String::new()),
            EntryKind::Symlink { target } => (b"l", target.clone()),
            EntryKind::Hardlink { target } => (b"h", target.clone()),
            EntryKind::File { content, size } => {
                let sha = match content {
                    Content::Path(_) => from_disk.next().expect("one hash per file entry"),
                    Content::Bytes(b) => hex::encode(Sha256::digest(&b[..])),
                };
                (b"f", format!("{size}:{sha}"))
            }
        };
        h.update(tag);
        put(&mut h, e.path.as_bytes());
        h.update(e.mode.to_le_bytes());
        h.update(e.uid.to_le_bytes());
        h.update(e.gid.to_le_bytes());
        put(&mut h, extra.as_bytes());
    }
    Ok(Digest::from_sha256(h.finalize().into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::sources::{add_directory, Owner};
    use crate::layer::tree::LayerEntry;

    #[test]
    fn cache_notices_changes() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a");
        std::fs::write(&f, "one").unwrap();
        let c = HashCache::in_memory();
        let h1 = c.file_sha256(&f).unwrap();
        assert_eq!(h1, Digest::of_bytes(b"one").hex());
        assert_eq!(c.file_sha256(&f).unwrap(), h1);
        // Same size, mtime forced back: ctime still moves, so the change is seen.
        let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(&f, "two").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(c.file_sha256(&f).unwrap(), Digest::of_bytes(b"two").hex());
    }

    #[test]
    fn tree_digest_tracks_content_not_mtime() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), "x").unwrap();
        let digest = |c: &HashCache| {
            let mut t = LayerTree::new();
            add_directory(&mut t, d.path(), "/", Owner::default(), "d").unwrap();
            tree_digest(&t, c).unwrap()
        };
        let c = HashCache::in_memory();
        let a = digest(&c);
        std::fs::File::options()
            .write(true)
            .open(d.path().join("a"))
            .unwrap()
            .set_modified(std::time::SystemTime::UNIX_EPOCH)
            .unwrap();
        assert_eq!(a, digest(&c));
        std::fs::write(d.path().join("a"), "y").unwrap();
        assert_ne!(a, digest(&c));
    }

    /// The same tree twice: files read from disk (hashed on every core) and the same bytes
    /// held in memory (hashed in the fold). A hash given to the wrong entry would differ.
    #[test]
    fn files_hashed_on_every_core_land_on_their_own_entries() {
        let d = tempfile::tempdir().unwrap();
        let mut on_disk = LayerTree::new();
        let mut in_memory = LayerTree::new();
        for i in 0..300u32 {
            // Sizes from 0 to ~600 KB, so workers finish out of order.
            let data: Vec<u8> = (0..(i * i * 7) % 600_000).map(|j| (j ^ i) as u8).collect();
            let name = format!("f{i:03}");
            std::fs::write(d.path().join(&name), &data).unwrap();
            let entry = |kind| LayerEntry {
                path: name.clone(),
                kind,
                mode: 0o644,
                uid: 0,
                gid: 0,
            };
            let kind = EntryKind::File {
                content: Content::Path(d.path().join(&name)),
                size: data.len() as u64,
            };
            on_disk.insert(entry(kind), "disk").unwrap();
            in_memory
                .insert(entry(EntryKind::bytes(data)), "memory")
                .unwrap();
        }
        let c = HashCache::in_memory();
        assert_eq!(
            tree_digest(&on_disk, &c).unwrap(),
            tree_digest(&in_memory, &c).unwrap()
        );
    }

    /// Two files gone before hashing: the error names the first in tree order, every time.
    #[test]
    fn an_unreadable_tree_fails_on_its_first_bad_file() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..50 {
            std::fs::write(d.path().join(format!("f{i:02}")), vec![i as u8; 100_000]).unwrap();
        }
        let mut t = LayerTree::new();
        add_directory(&mut t, d.path(), "/", Owner::default(), "d").unwrap();
        std::fs::remove_file(d.path().join("f31")).unwrap();
        std::fs::remove_file(d.path().join("f07")).unwrap();
        for _ in 0..5 {
            let e = tree_digest(&t, &HashCache::in_memory())
                .unwrap_err()
                .to_string();
            assert!(e.contains("f07") && !e.contains("f31"), "{e}");
        }
    }
}
