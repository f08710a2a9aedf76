//! The entries of one layer, keyed (and so sorted) by path.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{ImageError, Result};

/// Where a file's bytes come from.
#[derive(Debug, Clone)]
pub enum Content {
    Path(PathBuf),
    Bytes(Arc<Vec<u8>>),
}

#[derive(Debug, Clone)]
pub enum EntryKind {
    Dir,
    File {
        content: Content,
        size: u64,
    },
    Symlink {
        target: String,
    },
    /// A hard link to an earlier entry of the same layer (its path).
    Hardlink {
        target: String,
    },
}

impl EntryKind {
    /// A file whose bytes are held in memory (unpacked from an archive, a wheel, or made).
    pub fn bytes(data: Vec<u8>) -> EntryKind {
        EntryKind::File {
            size: data.len() as u64,
            content: Content::Bytes(Arc::new(data)),
        }
    }
}

#[derive(Debug, Clone)]
pub struct LayerEntry {
    /// Relative path, `/`-separated, no leading `/`, no trailing `/`.
    pub path: String,
    pub kind: EntryKind,
    /// Permission bits (0o7777 at most).
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
}

impl LayerEntry {
    fn same_as(&self, other: &LayerEntry) -> bool {
        let kind_eq = match (&self.kind, &other.kind) {
            (EntryKind::Dir, EntryKind::Dir) => true,
            (EntryKind::Symlink { target: a }, EntryKind::Symlink { target: b }) => a == b,
            (EntryKind::Hardlink { target: a }, EntryKind::Hardlink { target: b }) => a == b,
            _ => false,
        };
        kind_eq && self.mode == other.mode && self.uid == other.uid && self.gid == other.gid
    }
}

/// A layer's entries. Directories may be declared by several sources (the last declaration's
/// mode wins); any other path declared twice with different content is a conflict.
#[derive(Debug, Default)]
pub struct LayerTree {
    entries: BTreeMap<String, (LayerEntry, String)>,
}

impl LayerTree {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry; `origin` names the source in conflict messages.
    pub fn insert(&mut self, entry: LayerEntry, origin: &str) -> Result<()> {
        if let Some((old, old_origin)) = self.entries.get(&entry.path) {
            let both_dirs =
                matches!(old.kind, EntryKind::Dir) && matches!(entry.kind, EntryKind::Dir);
            if !both_dirs && !old.same_as(&entry) {
                return Err(ImageError::invalid(
                    format!("layer path `{}`", entry.path),
                    format!("declared by both {old_origin} and {origin}"),
                ));
            }
        }
        self.entries
            .insert(entry.path.clone(), (entry, origin.to_string()));
        Ok(())
    }

    /// Lists every missing parent directory (mode 0755, owner root), so that the tar lists
    /// each directory before what it holds.
    pub fn add_parents(&mut self) {
        let mut missing = Vec::new();
        for path in self.entries.keys() {
            let mut p = path.as_str();
            while let Some(i) = p.rfind('/') {
                p = &p[..i];
                if self.entries.contains_key(p) {
                    break;
                }
                missing.push(p.to_string());
            }
        }
        for p in missing {
            self.entries.entry(p.clone()).or_insert((
                LayerEntry {
                    path: p,
                    kind: EntryKind::Dir,
                    mode: 0o755,
                    uid: 0,
                    gid: 0,
                },
                "parent directory".to_string(),
            ));
        }
    }

    pub fn get(&self, path: &str) -> Option<&LayerEntry> {
        self.entries.get(path).map(|(e, _)| e)
    }

    pub fn entries(&self) -> impl Iterator<Item = &LayerEntry> {
        self.entries.values().map(|(e, _)| e)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of file content in the layer (for progress totals).
    pub fn content_bytes(&self) -> u64 {
        self.entries()
            .map(|e| match e.kind {
                EntryKind::File { size, .. } => size,
                _ => 0,
            })
            .sum()
    }
}

/// Joins a layer target (`/task`, `/`) and a relative path into a layer path.
pub fn join_target(target: &str, rel: &str) -> String {
    let t = target.trim_matches('/');
    match (t.is_empty(), rel.is_empty()) {
        (true, _) => rel.to_string(),
        (false, true) => t.to_string(),
        (false, false) => format!("{t}/{rel}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(p: &str, mode: u32) -> LayerEntry {
        LayerEntry {
            path: p.into(),
            kind: EntryKind::Dir,
            mode,
            uid: 0,
            gid: 0,
        }
    }

    #[test]
    fn parents_and_order() {
        let mut t = LayerTree::new();
        t.insert(
            LayerEntry {
                path: "usr/lib/x/y.so".into(),
                kind: EntryKind::Symlink { target: "z".into() },
                mode: 0o777,
                uid: 0,
                gid: 0,
            },
            "a",
        )
        .unwrap();
        t.insert(dir("usr", 0o700), "a").unwrap();
        t.insert(dir("usr", 0o755), "b").unwrap();
        t.add_parents();
        let paths: Vec<_> = t.entries().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["usr", "usr/lib", "usr/lib/x", "usr/lib/x/y.so"]);
        assert_eq!(t.get("usr").unwrap().mode, 0o755);
    }

    #[test]
    fn conflicting_entries_are_refused() {
        let mut t = LayerTree::new();
        let link = |target: &str| LayerEntry {
            path: "bin/sh".into(),
            kind: EntryKind::Symlink {
                target: target.into(),
            },
            mode: 0o777,
            uid: 0,
            gid: 0,
        };
        t.insert(link("busybox"), "pkg-a").unwrap();
        t.insert(link("busybox"), "pkg-b").unwrap();
        let e = t.insert(link("dash"), "pkg-c").unwrap_err().to_string();
        assert_eq!(e, "layer path `bin/sh`: declared by both pkg-b and pkg-c");
    }

    #[test]
    fn join() {
        assert_eq!(join_target("/", "a/b"), "a/b");
        assert_eq!(join_target("/task", "a"), "task/a");
        assert_eq!(join_target("/task/", ""), "task");
    }
}
