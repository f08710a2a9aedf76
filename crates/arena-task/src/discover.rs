//! Finding task directories below a root: every directory holding a `config.yaml`.

use std::path::{Path, PathBuf};

use crate::error::TaskError;
use crate::task::CONFIG_FILE;

/// Directories never searched for tasks (outputs, caches, VCS metadata).
const SKIP_DIRS: &[&str] = &["build", "__pycache__", "node_modules", "target"];

/// A task directory found on disk with its id relative to the search root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundTask {
    pub id: String,
    pub dir: PathBuf,
}

/// Lists the tasks at or below `root`, sorted by id. If `root` itself holds a `config.yaml`
/// it is the one task, with its directory name as id. A root with no task at all is an error.
pub fn discover(root: &Path) -> Result<Vec<FoundTask>, TaskError> {
    let (mut found, _) = walk_reporting(root)?;
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// The tasks at or below `root` (ids relative to it, unsorted) and the directories below it
/// that hold no task (no config.yaml in them or below), each named at its top only.
pub(crate) fn walk_reporting(root: &Path) -> Result<(Vec<FoundTask>, Vec<PathBuf>), TaskError> {
    let meta = std::fs::metadata(root).map_err(|e| TaskError::io(root, e))?;
    if !meta.is_dir() {
        return Err(TaskError::io(
            root,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a directory"),
        ));
    }
    if root.join(CONFIG_FILE).is_file() {
        let id = root
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| root.display().to_string());
        let task = FoundTask {
            id,
            dir: root.to_path_buf(),
        };
        return Ok((vec![task], Vec::new()));
    }
    let mut found = Vec::new();
    let mut empty = Vec::new();
    walk(root, root, &mut found, &mut empty)?;
    if found.is_empty() {
        return Err(TaskError::NoTasks {
            dir: root.to_path_buf(),
        });
    }
    Ok((found, empty))
}

fn walk(
    root: &Path,
    dir: &Path,
    found: &mut Vec<FoundTask>,
    empty: &mut Vec<PathBuf>,
) -> Result<(), TaskError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| TaskError::io(dir, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| TaskError::io(dir, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Symlinked directories are not followed: a task tree must not reach outside itself.
        let is_dir = entry
            .file_type()
            .map_err(|e| TaskError::io(entry.path(), e))?
            .is_dir();
        if !is_dir || name.starts_with('.') || SKIP_DIRS.contains(&name.as_ref()) {
            continue;
        }
        let path = entry.path();
        if path.join(CONFIG_FILE).is_file() {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let id = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            found.push(FoundTask { id, dir: path });
        } else {
            let (tasks_before, empty_before) = (found.len(), empty.len());
            walk(root, &path, found, empty)?;
            if found.len() == tasks_before {
                // Nothing below: named once, here, not for each of its subdirectories.
                empty.truncate(empty_before);
                empty.push(path);
            }
        }
    }
    Ok(())
}

/// The tasks below each of `roots`, in order; one id found under two roots is refused with
/// both directories named (a set or a copy keyed by id would hold only one of them).
pub fn discover_all(roots: &[PathBuf]) -> Result<Vec<FoundTask>, TaskError> {
    let mut seen: std::collections::BTreeMap<String, PathBuf> = Default::default();
    let mut out = Vec::new();
    for root in roots {
        for f in discover(root)? {
            if let Some(first) = seen.insert(f.id.clone(), f.dir.clone()) {
                return Err(TaskError::DuplicateId {
                    id: f.id,
                    first,
                    second: f.dir,
                });
            }
            out.push(f);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_tasks_sorted() {
        let t = tempfile::tempdir().unwrap();
        for d in [
            "b/src/t2",
            "a/src/t1",
            "a/src/t1/nested",
            "a/build/t3",
            ".git/t4",
        ] {
            std::fs::create_dir_all(t.path().join(d)).unwrap();
            std::fs::write(t.path().join(d).join(CONFIG_FILE), "").unwrap();
        }
        let ids: Vec<_> = discover(t.path())
            .unwrap()
            .into_iter()
            .map(|f| f.id)
            .collect();
        // A task's own subdirectories are not searched, nor build/ or hidden directories.
        assert_eq!(ids, ["a/src/t1", "b/src/t2"]);
    }

    #[test]
    fn root_that_is_a_task() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("softmax");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join(CONFIG_FILE), "").unwrap();
        let f = discover(&d).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "softmax");
    }

    #[test]
    fn empty_directory_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let e = discover(t.path()).unwrap_err().to_string();
        assert!(
            e.contains("no config.yaml here or in any directory below"),
            "{e}"
        );
        let e = discover(&t.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("No such file"), "{e}");
    }
}
