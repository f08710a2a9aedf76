//! Files below a directory, for what a kit takes in: regular files only, sorted, each named by
//! its path relative to the directory. A link or a device is refused by name: a kit holds
//! bytes, and a link could point the installed tree anywhere.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{OfflineError, Result};

/// One regular file: where it is, its path relative to the walked directory, and whether
/// anyone may execute it.
pub struct TreeFile {
    pub path: PathBuf,
    pub relative: String,
    pub executable: bool,
}

/// Every regular file at or below `dir` (itself, if it is a file), sorted by relative path.
pub fn regular_files(dir: &Path) -> Result<Vec<TreeFile>> {
    let mut out = Vec::new();
    walk(dir, "", &mut out)?;
    out.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok(out)
}

fn walk(path: &Path, relative: &str, out: &mut Vec<TreeFile>) -> Result<()> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| OfflineError::io(path, e))?;
    let ft = meta.file_type();
    if ft.is_file() {
        out.push(TreeFile {
            path: path.to_path_buf(),
            relative: relative.to_string(),
            executable: meta.permissions().mode() & 0o111 != 0,
        });
    } else if ft.is_dir() {
        for entry in std::fs::read_dir(path).map_err(|e| OfflineError::io(path, e))? {
            let entry = entry.map_err(|e| OfflineError::io(path, e))?;
            let name = entry.file_name();
            let name = name.to_str().ok_or_else(|| {
                OfflineError::invalid(
                    entry.path().display(),
                    "a name that is not UTF-8 cannot go into a kit",
                )
            })?;
            let child = if relative.is_empty() {
                name.to_string()
            } else {
                format!("{relative}/{name}")
            };
            walk(&entry.path(), &child, out)?;
        }
    } else {
        return Err(OfflineError::invalid(
            path.display(),
            "a link or special file cannot go into a kit (it holds regular files only)",
        ));
    }
    Ok(())
}

/// Creates `path`'s parent directories.
pub fn make_parent(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| OfflineError::io(dir, e))?;
    }
    Ok(())
}

/// Sets a file's mode to 0755 or 0644.
pub fn set_executable(path: &Path, executable: bool) -> Result<()> {
    let mode = if executable { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| OfflineError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_listed_sorted_with_their_modes_and_links_are_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("b/c")).unwrap();
        std::fs::write(d.path().join("b/c/x.py"), "x").unwrap();
        std::fs::write(d.path().join("a.sh"), "#!/bin/sh").unwrap();
        set_executable(&d.path().join("a.sh"), true).unwrap();
        let files = regular_files(d.path()).unwrap();
        let names: Vec<(&str, bool)> = files
            .iter()
            .map(|f| (f.relative.as_str(), f.executable))
            .collect();
        assert_eq!(names, [("a.sh", true), ("b/c/x.py", false)]);

        std::os::unix::fs::symlink("/etc/passwd", d.path().join("b/link")).unwrap();
        let err = regular_files(d.path()).err().unwrap().to_string();
        assert!(err.contains("b/link") && err.contains("link"), "{err}");
    }
}
