//! Reading tar archives into a layer tree, refusing entries that would land outside the root:
//! absolute paths, `..` components, symlinks that climb above the root, hard links to
//! anything but an earlier entry, and device nodes or FIFOs.

use std::io::Read;
use std::path::Path;

use crate::error::{ImageError, Result};
use crate::layer::tree::{join_target, EntryKind, LayerEntry, LayerTree};

/// How archive paths are placed into the layer.
pub struct Placement<'a> {
    /// Directory of the layer the archive's root lands in (`/` or `/opt/x`).
    pub target: &'a str,
    /// Rewrites a normalized archive path (merged-usr for Debian packages).
    pub rewrite: &'a dyn Fn(&str) -> String,
    pub uid: u64,
    pub gid: u64,
    /// Names the archive in conflict messages.
    pub origin: &'a str,
}

fn unsafe_entry(archive: &Path, entry: &str, reason: &str) -> ImageError {
    ImageError::UnsafeEntry {
        archive: archive.to_path_buf(),
        entry: entry.to_string(),
        reason: reason.to_string(),
    }
}

/// Normalizes an archive path: strips `./`, refuses absolute paths and `..`. `None` for the
/// archive root itself.
pub fn normalize_path(archive: &Path, raw: &str) -> Result<Option<String>> {
    if raw.starts_with('/') {
        return Err(unsafe_entry(archive, raw, "absolute path"));
    }
    let mut parts = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err(unsafe_entry(archive, raw, "path contains `..`")),
            other => parts.push(other),
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

/// Whether a relative symlink target, resolved from the link's directory, stays inside the root.
pub fn symlink_stays_inside(link_path: &str, target: &str) -> bool {
    if target.starts_with('/') {
        // Absolute targets resolve against the container's root, never the host's.
        return true;
    }
    let mut depth: i64 = link_path.split('/').count() as i64 - 1;
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

/// Adds every entry of the (uncompressed) tar stream `r` to `tree`.
pub fn read_tar_into<R: Read>(
    tree: &mut LayerTree,
    r: R,
    archive: &Path,
    place: &Placement,
) -> Result<usize> {
    let mut ar = tar::Archive::new(r);
    let mut count = 0;
    let entries = ar.entries().map_err(|e| ImageError::io(archive, e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| ImageError::Archive {
            path: archive.to_path_buf(),
            message: format!("unreadable entry: {e}"),
        })?;
        let raw_bytes = entry.path_bytes().into_owned();
        let raw = String::from_utf8(raw_bytes)
            .map_err(|_| unsafe_entry(archive, "<non-UTF-8 name>", "path is not UTF-8"))?;
        let Some(rel) = normalize_path(archive, &raw)? else {
            continue;
        };
        let path = join_target(place.target, &(place.rewrite)(&rel));
        let h = entry.header();
        let mode = h.mode().map_err(|e| ImageError::io(archive, e))? & 0o7777;
        let kind = match h.entry_type() {
            tar::EntryType::Directory => EntryKind::Dir,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.size();
                let mut buf = Vec::with_capacity(size as usize);
                entry
                    .read_to_end(&mut buf)
                    .map_err(|e| ImageError::Archive {
                        path: archive.to_path_buf(),
                        message: format!("entry `{raw}` is truncated: {e}"),
                    })?;
                EntryKind::bytes(buf)
            }
            tar::EntryType::Symlink => {
                let target = link_name(&entry, archive, &raw)?;
                if !symlink_stays_inside(&path, &target) {
                    return Err(unsafe_entry(
                        archive,
                        &raw,
                        &format!("symlink to `{target}` escapes the root"),
                    ));
                }
                EntryKind::Symlink { target }
            }
            tar::EntryType::Link => {
                let target = link_name(&entry, archive, &raw)?;
                let norm = normalize_path(archive, &target)
                    .map_err(|_| {
                        unsafe_entry(
                            archive,
                            &raw,
                            &format!("hard link to `{target}` escapes the root"),
                        )
                    })?
                    .ok_or_else(|| unsafe_entry(archive, &raw, "hard link to the root"))?;
                let t = join_target(place.target, &(place.rewrite)(&norm));
                if !matches!(tree.get(&t).map(|e| &e.kind), Some(EntryKind::File { .. })) {
                    return Err(unsafe_entry(
                        archive,
                        &raw,
                        &format!(
                            "hard link to `{target}`, which is not an earlier file of the archive"
                        ),
                    ));
                }
                EntryKind::Hardlink { target: t }
            }
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                return Err(unsafe_entry(
                    archive,
                    &raw,
                    "device nodes and FIFOs are not allowed in layers",
                ))
            }
            other => {
                return Err(unsafe_entry(
                    archive,
                    &raw,
                    &format!("unsupported entry type {other:?}"),
                ))
            }
        };
        tree.insert(
            LayerEntry {
                path,
                kind,
                mode,
                uid: place.uid,
                gid: place.gid,
            },
            place.origin,
        )?;
        count += 1;
    }
    Ok(count)
}

fn link_name<R: Read>(entry: &tar::Entry<R>, archive: &Path, raw: &str) -> Result<String> {
    let name = entry
        .link_name_bytes()
        .ok_or_else(|| unsafe_entry(archive, raw, "link without a target"))?;
    String::from_utf8(name.into_owned())
        .map_err(|_| unsafe_entry(archive, raw, "link target is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_with(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, data_or_link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            match kind {
                tar::EntryType::Symlink | tar::EntryType::Link => {
                    h.set_size(0);
                    // Write raw names so that unsafe ones reach the reader unchanged.
                    h.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
                    h.set_link_name_literal(data_or_link).unwrap();
                    h.set_cksum();
                    b.append(&h, std::io::empty()).unwrap();
                }
                _ => {
                    h.set_size(data_or_link.len() as u64);
                    h.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
                    h.set_cksum();
                    b.append(&h, data_or_link.as_bytes()).unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    fn read(data: &[u8]) -> Result<LayerTree> {
        let mut t = LayerTree::new();
        let id = |s: &str| s.to_string();
        read_tar_into(
            &mut t,
            data,
            Path::new("x.tar"),
            &Placement {
                target: "/",
                rewrite: &id,
                uid: 0,
                gid: 0,
                origin: "x.tar",
            },
        )?;
        Ok(t)
    }

    #[test]
    fn reads_safe_entries() {
        let data = tar_with(&[
            ("./a/", tar::EntryType::Directory, ""),
            ("./a/f", tar::EntryType::Regular, "hello"),
            ("./a/l", tar::EntryType::Symlink, "../a/f"),
            ("./a/abs", tar::EntryType::Symlink, "/usr/bin/env"),
            ("./a/h", tar::EntryType::Link, "./a/f"),
        ]);
        let t = read(&data).unwrap();
        assert!(matches!(
            t.get("a/f").unwrap().kind,
            EntryKind::File { size: 5, .. }
        ));
        assert!(
            matches!(&t.get("a/h").unwrap().kind, EntryKind::Hardlink { target } if target == "a/f")
        );
    }

    #[test]
    fn refuses_traversal() {
        let e = read(&tar_with(&[("../evil", tar::EntryType::Regular, "x")])).unwrap_err();
        assert_eq!(e.to_string(), "x.tar: entry `../evil`: path contains `..`");
        let e = read(&tar_with(&[("a/../../evil", tar::EntryType::Regular, "x")])).unwrap_err();
        assert!(e.to_string().contains("path contains `..`"), "{e}");
        let e = read(&tar_with(&[("/etc/passwd", tar::EntryType::Regular, "x")])).unwrap_err();
        assert_eq!(e.to_string(), "x.tar: entry `/etc/passwd`: absolute path");
        let e = read(&tar_with(&[("a/l", tar::EntryType::Symlink, "../../etc")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.tar: entry `a/l`: symlink to `../../etc` escapes the root"
        );
        let e = read(&tar_with(&[("h", tar::EntryType::Link, "/etc/shadow")])).unwrap_err();
        assert!(
            e.to_string()
                .contains("hard link to `/etc/shadow` escapes the root"),
            "{e}"
        );
        let e = read(&tar_with(&[("h", tar::EntryType::Link, "missing")])).unwrap_err();
        assert!(e.to_string().contains("not an earlier file"), "{e}");
        let e = read(&tar_with(&[("dev", tar::EntryType::Char, "")])).unwrap_err();
        assert!(e.to_string().contains("device nodes"), "{e}");
    }

    #[test]
    fn symlink_escape_rule() {
        assert!(symlink_stays_inside("a/b/c", "../x"));
        assert!(symlink_stays_inside("a/b/c", "../../x"));
        assert!(!symlink_stays_inside("a/b/c", "../../../x"));
        assert!(!symlink_stays_inside("c", "../x"));
        assert!(symlink_stays_inside("c", "/anything"));
    }
}
