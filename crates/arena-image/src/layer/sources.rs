//! Layer sources on the host filesystem: a directory tree, a single file, a task directory.
//! Host metadata is normalized: modes to 0755/0644 by the execute bit, owners to the layer's.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::error::{ImageError, Result};
use crate::layer::tree::{join_target, Content, EntryKind, LayerEntry, LayerTree};

/// Owner of the entries a source adds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Owner {
    pub uid: u64,
    pub gid: u64,
}

fn normalized_mode(meta: &std::fs::Metadata) -> u32 {
    if meta.is_dir() || meta.permissions().mode() & 0o111 != 0 {
        0o755
    } else {
        0o644
    }
}

/// Adds a directory tree under `target`. Hard links inside the tree are kept: among the paths
/// sharing an inode, the first in sorted order holds the content and the others link to it.
pub fn add_directory(
    tree: &mut LayerTree,
    dir: &Path,
    target: &str,
    owner: Owner,
    origin: &str,
) -> Result<()> {
    let meta = std::fs::metadata(dir).map_err(|e| ImageError::io(dir, e))?;
    if !meta.is_dir() {
        return Err(ImageError::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a directory"),
        ));
    }
    // The target itself is listed even when the tree is empty: the recipe asked for it.
    let top = join_target(target, "");
    if !top.is_empty() {
        tree.insert(
            LayerEntry {
                path: top,
                kind: EntryKind::Dir,
                mode: 0o755,
                uid: owner.uid,
                gid: owner.gid,
            },
            origin,
        )?;
    }
    let mut inodes: BTreeMap<(u64, u64), Vec<String>> = BTreeMap::new();
    let mut files: Vec<LayerEntry> = Vec::new();
    walk(
        dir,
        "",
        target,
        owner,
        origin,
        tree,
        &mut inodes,
        &mut files,
    )?;
    // Resolve hard-link groups deterministically, by path order.
    let mut link_to: BTreeMap<String, String> = BTreeMap::new();
    for paths in inodes.values_mut() {
        if paths.len() > 1 {
            paths.sort();
            for p in &paths[1..] {
                link_to.insert(p.clone(), paths[0].clone());
            }
        }
    }
    for mut f in files {
        if let Some(first) = link_to.get(&f.path) {
            f.kind = EntryKind::Hardlink {
                target: first.clone(),
            };
        }
        tree.insert(f, origin)?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn walk(
    dir: &Path,
    rel: &str,
    target: &str,
    owner: Owner,
    origin: &str,
    tree: &mut LayerTree,
    inodes: &mut BTreeMap<(u64, u64), Vec<String>>,
    files: &mut Vec<LayerEntry>,
) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| ImageError::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| ImageError::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name().into_string().map_err(|n| {
            ImageError::io(
                &path,
                std::io::Error::other(format!("file name {n:?} is not UTF-8")),
            )
        })?;
        let child_rel = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let layer_path = join_target(target, &child_rel);
        let meta = std::fs::symlink_metadata(&path).map_err(|e| ImageError::io(&path, e))?;
        let ft = meta.file_type();
        let base = |kind| LayerEntry {
            path: layer_path.clone(),
            kind,
            mode: normalized_mode(&meta),
            uid: owner.uid,
            gid: owner.gid,
        };
        if ft.is_dir() {
            tree.insert(base(EntryKind::Dir), origin)?;
            walk(
                &path, &child_rel, target, owner, origin, tree, inodes, files,
            )?;
        } else if ft.is_symlink() {
            let t = std::fs::read_link(&path).map_err(|e| ImageError::io(&path, e))?;
            let target = t.into_os_string().into_string().map_err(|_| {
                ImageError::io(&path, std::io::Error::other("symlink target is not UTF-8"))
            })?;
            let mut e = base(EntryKind::Symlink { target });
            e.mode = 0o777;
            tree.insert(e, origin)?;
        } else if ft.is_file() {
            if meta.nlink() > 1 {
                inodes
                    .entry((meta.dev(), meta.ino()))
                    .or_default()
                    .push(layer_path.clone());
            }
            files.push(base(EntryKind::File {
                content: Content::Path(path.clone()),
                size: meta.len(),
            }));
        } else {
            return Err(ImageError::io(
                &path,
                std::io::Error::other("sockets, FIFOs and device nodes cannot go into a layer"),
            ));
        }
    }
    Ok(())
}

/// Adds one file at `target_path`; `mode` overrides the normalized mode.
pub fn add_file(
    tree: &mut LayerTree,
    file: &Path,
    target_path: &str,
    mode: Option<u32>,
    owner: Owner,
    origin: &str,
) -> Result<()> {
    let meta = std::fs::metadata(file).map_err(|e| ImageError::io(file, e))?;
    if !meta.is_file() {
        return Err(ImageError::io(
            file,
            std::io::Error::other("not a regular file"),
        ));
    }
    tree.insert(
        LayerEntry {
            path: join_target(target_path, ""),
            kind: EntryKind::File {
                content: Content::Path(file.to_path_buf()),
                size: meta.len(),
            },
            mode: mode.unwrap_or_else(|| normalized_mode(&meta)),
            uid: owner.uid,
            gid: owner.gid,
        },
        origin,
    )
}

/// Adds a task directory under `target`: exactly the tree the task digest covers (no
/// `build/`, no caches), so the image holds what the lockfile's task digest names.
pub fn add_task(tree: &mut LayerTree, task_dir: &Path, target: &str, origin: &str) -> Result<()> {
    tree.insert(
        LayerEntry {
            path: join_target(target, ""),
            kind: EntryKind::Dir,
            mode: 0o755,
            uid: 0,
            gid: 0,
        },
        origin,
    )?;
    for e in arena_task::task_tree(task_dir)? {
        let path = join_target(target, &e.rel);
        let (kind, mode) = match e.kind {
            arena_task::EntryKind::Dir => (EntryKind::Dir, 0o755),
            arena_task::EntryKind::Symlink { target } => (EntryKind::Symlink { target }, 0o777),
            arena_task::EntryKind::File { executable, size } => (
                EntryKind::File {
                    content: Content::Path(e.path.clone()),
                    size,
                },
                if executable { 0o755 } else { 0o644 },
            ),
        };
        tree.insert(
            LayerEntry {
                path,
                kind,
                mode,
                uid: 0,
                gid: 0,
            },
            origin,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_modes_owners_and_hardlinks() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/a"), "x").unwrap();
        std::fs::set_permissions(d.join("sub/a"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(d.join("run"), "#!/bin/sh").unwrap();
        std::fs::set_permissions(d.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::hard_link(d.join("sub/a"), d.join("b")).unwrap();
        std::os::unix::fs::symlink("sub/a", d.join("ln")).unwrap();
        let mut tree = LayerTree::new();
        add_directory(&mut tree, d, "/opt", Owner::default(), "dir").unwrap();
        tree.add_parents();
        let got: Vec<(String, u32, String)> = tree
            .entries()
            .map(|e| {
                let k = match &e.kind {
                    EntryKind::Dir => "dir".to_string(),
                    EntryKind::File { size, .. } => format!("file {size}"),
                    EntryKind::Symlink { target } => format!("-> {target}"),
                    EntryKind::Hardlink { target } => format!("=> {target}"),
                };
                (e.path.clone(), e.mode, k)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("opt".into(), 0o755, "dir".into()),
                ("opt/b".into(), 0o644, "file 1".into()),
                ("opt/ln".into(), 0o777, "-> sub/a".into()),
                ("opt/run".into(), 0o755, "file 9".into()),
                ("opt/sub".into(), 0o755, "dir".into()),
                // The later path of the inode links to the earlier one.
                ("opt/sub/a".into(), 0o644, "=> opt/b".into()),
            ]
        );
    }

    #[test]
    fn an_empty_directory_still_gives_its_target() {
        let t = tempfile::tempdir().unwrap();
        let mut tree = LayerTree::new();
        let owner = Owner { uid: 7, gid: 8 };
        add_directory(&mut tree, t.path(), "/usr/sbin", owner, "dir").unwrap();
        tree.add_parents();
        let got: Vec<(String, u64)> = tree.entries().map(|e| (e.path.clone(), e.uid)).collect();
        assert_eq!(got, [("usr".into(), 0), ("usr/sbin".into(), 7)]);
        // At the root there is nothing to list.
        let mut tree = LayerTree::new();
        add_directory(&mut tree, t.path(), "/", Owner::default(), "dir").unwrap();
        assert!(tree.is_empty());
    }
}
