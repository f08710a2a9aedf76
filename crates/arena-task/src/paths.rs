//! Checks that a path named in `config.yaml` stays inside the task directory.

use std::path::{Component, Path, PathBuf};

use crate::error::TaskError;

/// Lexical checks, done before touching the filesystem: relative, no `..`, not empty.
pub fn check_relative(file: &Path, field: &str, rel: &str) -> Result<(), TaskError> {
    if rel.is_empty() {
        return Err(TaskError::field(file, field, "empty path"));
    }
    let p = Path::new(rel);
    if p.is_absolute() {
        return Err(TaskError::field(
            file,
            field,
            format!("`{rel}` is absolute; paths must be relative to the task directory"),
        ));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(TaskError::field(
            file,
            field,
            format!("`{rel}` contains `..`; paths must stay inside the task directory"),
        ));
    }
    Ok(())
}

/// Resolves `rel` under `task_dir` following symlinks and checks that the result is a regular
/// file that is still inside the task directory.
pub fn resolve_inside(
    task_dir: &Path,
    file: &Path,
    field: &str,
    rel: &str,
) -> Result<PathBuf, TaskError> {
    check_relative(file, field, rel)?;
    let root = task_dir
        .canonicalize()
        .map_err(|e| TaskError::io(task_dir, e))?;
    let joined = task_dir.join(rel);
    let real = match joined.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let what = if joined.symlink_metadata().is_ok() {
                "is a dangling symlink"
            } else {
                "does not exist in the task directory"
            };
            return Err(TaskError::field(file, field, format!("`{rel}` {what}")));
        }
        Err(e) => return Err(TaskError::io(joined, e)),
    };
    if !real.starts_with(&root) {
        return Err(TaskError::field(
            file,
            field,
            format!(
                "`{rel}` resolves to {} which is outside the task directory (symlink escape)",
                real.display()
            ),
        ));
    }
    if !real.is_file() {
        return Err(TaskError::field(
            file,
            field,
            format!("`{rel}` is not a regular file"),
        ));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_refusals() {
        let f = Path::new("c.yaml");
        assert!(check_relative(f, "s", "a/b.py").is_ok());
        assert!(check_relative(f, "s", "./a/b.py").is_ok());
        let e = check_relative(f, "s", "../x.py").unwrap_err().to_string();
        assert_eq!(
            e,
            "c.yaml: s: `../x.py` contains `..`; paths must stay inside the task directory"
        );
        assert!(check_relative(f, "s", "a/../../x").is_err());
        assert!(check_relative(f, "s", "/etc/passwd")
            .unwrap_err()
            .to_string()
            .contains("absolute"));
        assert!(check_relative(f, "s", "").is_err());
    }

    #[test]
    fn symlink_escape_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.py"), "x").unwrap();
        let task = tempfile::tempdir().unwrap();
        std::fs::create_dir(task.path().join("source")).unwrap();
        std::fs::write(task.path().join("source/ok.py"), "x").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.py"),
            task.path().join("source/k.py"),
        )
        .unwrap();
        std::os::unix::fs::symlink("ok.py", task.path().join("source/alias.py")).unwrap();
        let f = Path::new("config.yaml");
        assert!(resolve_inside(task.path(), f, "s", "source/ok.py").is_ok());
        assert!(resolve_inside(task.path(), f, "s", "source/alias.py").is_ok());
        let e = resolve_inside(task.path(), f, "s", "source/k.py")
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the task directory"), "{e}");
        let e = resolve_inside(task.path(), f, "s", "source/none.py")
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        let e = resolve_inside(task.path(), f, "s", "source")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }
}
