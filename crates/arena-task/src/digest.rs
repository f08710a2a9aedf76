//! The task digest: sha256 over a canonical encoding of the task tree. It depends on paths,
//! contents, the executable bit and symlink targets only, so mtimes, checkout order and the
//! umask of whoever copied the tree do not change it.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use arena_digest::Digest;
use sha2::{Digest as _, Sha256};

use crate::error::TaskError;

/// Directory names that hold outputs or caches, never inputs. `build/` is only skipped at the
/// task's top level, where harnesses write their reports.
const CACHE_DIRS: &[&str] = &[
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".ipynb_checkpoints",
    ".git",
];
const CACHE_SUFFIXES: &[&str] = &[".pyc", ".pyo"];

/// Version tag of the encoding; bump it if the encoding ever changes.
const DOMAIN: &[u8] = b"arena.task-digest.v1\n";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File { executable: bool, size: u64 },
    Symlink { target: String },
}

/// One entry of a task tree, as the digest and the image's task layer see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// `/`-separated path relative to the task directory.
    pub rel: String,
    pub path: PathBuf,
    pub kind: EntryKind,
}

/// Lists the task tree in canonical order (byte order of the relative path), without
/// `build/` and caches. Sockets, FIFOs and device nodes are refused.
pub fn task_tree(dir: &Path) -> Result<Vec<TreeEntry>, TaskError> {
    let mut out = Vec::new();
    collect(dir, "", &mut out)?;
    out.sort_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
    Ok(out)
}

fn collect(dir: &Path, prefix: &str, out: &mut Vec<TreeEntry>) -> Result<(), TaskError> {
    let rd = std::fs::read_dir(dir).map_err(|e| TaskError::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| TaskError::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name().into_string().map_err(|n| {
            TaskError::io(
                &path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("file name {n:?} is not UTF-8"),
                ),
            )
        })?;
        let meta = std::fs::symlink_metadata(&path).map_err(|e| TaskError::io(&path, e))?;
        let ft = meta.file_type();
        if ft.is_dir()
            && (CACHE_DIRS.contains(&name.as_str()) || (prefix.is_empty() && name == "build"))
        {
            continue;
        }
        if ft.is_file() && CACHE_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            continue;
        }
        let rel = format!("{prefix}{name}");
        let kind = if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File {
                executable: meta.permissions().mode() & 0o111 != 0,
                size: meta.len(),
            }
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&path).map_err(|e| TaskError::io(&path, e))?;
            EntryKind::Symlink {
                target: target.to_string_lossy().into_owned(),
            }
        } else {
            return Err(TaskError::io(
                &path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "special file (socket, FIFO or device) in a task tree",
                ),
            ));
        };
        let is_dir = kind == EntryKind::Dir;
        out.push(TreeEntry {
            rel: rel.clone(),
            path: path.clone(),
            kind,
        });
        if is_dir {
            collect(&path, &format!("{rel}/"), out)?;
        }
    }
    Ok(())
}

fn put_bytes(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

/// `sha256:<hex>` of the task tree in `dir`.
pub fn task_digest(dir: &Path) -> Result<Digest, TaskError> {
    digest_entries(DOMAIN, &task_tree(dir)?)
}

/// `sha256:<hex>` of the task tree without the files the agent may edit (`source_file_path`):
/// the harness, configuration and everything else the evaluator trusts. A task result names
/// it, so two results can be compared only if they were judged by the same harness. Of an
/// editable file split into kernel and tests ([`crate::split`]), the tests are the task's and
/// are covered (after the tree, as `s`, path, bytes).
pub fn harness_digest(dir: &Path, editable: &[String]) -> Result<Digest, TaskError> {
    let mut tree = task_tree(dir)?;
    let is_editable = |e: &TreeEntry| editable.iter().any(|s| s.trim_start_matches("./") == e.rel);
    let mut tests = Vec::new();
    for e in tree.iter().filter(|e| is_editable(e)) {
        if let EntryKind::File { .. } = e.kind {
            if let Ok(text) = std::fs::read_to_string(&e.path) {
                if let Some(part) = crate::split::harness_part(&text) {
                    tests.push((e.rel.clone(), part.as_bytes().to_vec()));
                }
            }
        }
    }
    tree.retain(|e| !is_editable(e));
    let mut h = Sha256::new();
    h.update(HARNESS_DOMAIN);
    hash_entries(&mut h, &tree)?;
    for (rel, bytes) in &tests {
        h.update(b"s");
        put_bytes(&mut h, rel.as_bytes());
        put_bytes(&mut h, bytes);
    }
    Ok(Digest::from_sha256(h.finalize().into()))
}

const HARNESS_DOMAIN: &[u8] = b"arena.harness-digest.v1\n";

fn digest_entries(domain: &[u8], tree: &[TreeEntry]) -> Result<Digest, TaskError> {
    let mut h = Sha256::new();
    h.update(domain);
    hash_entries(&mut h, tree)?;
    Ok(Digest::from_sha256(h.finalize().into()))
}

fn hash_entries(h: &mut Sha256, tree: &[TreeEntry]) -> Result<(), TaskError> {
    let mut buf = vec![0u8; 64 * 1024];
    for e in tree {
        match &e.kind {
            EntryKind::Dir => {
                h.update(b"d");
                put_bytes(h, e.rel.as_bytes());
            }
            EntryKind::Symlink { target } => {
                h.update(b"l");
                put_bytes(h, e.rel.as_bytes());
                put_bytes(h, target.as_bytes());
            }
            EntryKind::File { executable, size } => {
                h.update(if *executable { b"x" } else { b"f" });
                put_bytes(h, e.rel.as_bytes());
                h.update(size.to_le_bytes());
                let mut f =
                    std::fs::File::open(&e.path).map_err(|err| TaskError::io(&e.path, err))?;
                let mut seen = 0u64;
                loop {
                    let n = f
                        .read(&mut buf)
                        .map_err(|err| TaskError::io(&e.path, err))?;
                    if n == 0 {
                        break;
                    }
                    seen += n as u64;
                    h.update(&buf[..n]);
                }
                if seen != *size {
                    return Err(TaskError::io(
                        &e.path,
                        std::io::Error::other("file changed size while it was being hashed"),
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn harness_digest_ignores_editable_sources_only() {
        let a = tempfile::tempdir().unwrap();
        make_tree(a.path());
        let editable = vec!["source/k.py".to_string()];
        let before = harness_digest(a.path(), &editable).unwrap();
        assert_ne!(before, task_digest(a.path()).unwrap());
        fs::write(a.path().join("source/k.py"), "def k(): return 1\n").unwrap();
        assert_eq!(before, harness_digest(a.path(), &editable).unwrap());
        fs::write(a.path().join("scripts/run.py"), "print(2)\n").unwrap();
        assert_ne!(before, harness_digest(a.path(), &editable).unwrap());
    }

    #[test]
    fn harness_digest_covers_the_tests_of_a_split_file() {
        let a = tempfile::tempdir().unwrap();
        make_tree(a.path());
        let rule = "#".repeat(146);
        let split = |kernel: &str, tests: &str| format!("{kernel}{rule}\n{tests}");
        let k = a.path().join("source/k.py");
        fs::write(&k, split("def k(): pass\n", "def test(): k()\n")).unwrap();
        let editable = vec!["source/k.py".to_string()];
        let before = harness_digest(a.path(), &editable).unwrap();
        // The agent's part may change; the tests may not.
        fs::write(&k, split("def k(): return 1\n", "def test(): k()\n")).unwrap();
        assert_eq!(before, harness_digest(a.path(), &editable).unwrap());
        fs::write(&k, split("def k(): pass\n", "def test(): pass\n")).unwrap();
        assert_ne!(before, harness_digest(a.path(), &editable).unwrap());
    }

    fn make_tree(root: &Path) {
        fs::create_dir_all(root.join("source")).unwrap();
        fs::create_dir_all(root.join("scripts")).unwrap();
        fs::write(root.join("config.yaml"), "task_type: x\n").unwrap();
        fs::write(root.join("source/k.py"), "def k(): pass\n").unwrap();
        fs::write(root.join("scripts/run.py"), "print(1)\n").unwrap();
        std::os::unix::fs::symlink("../source/k.py", root.join("scripts/k.py")).unwrap();
    }

    #[test]
    fn stable_across_mtime_order_and_umask() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        make_tree(a.path());
        // Same contents, written in another order, with other modes and mtimes.
        fs::create_dir_all(b.path().join("scripts")).unwrap();
        fs::write(b.path().join("scripts/run.py"), "print(1)\n").unwrap();
        std::os::unix::fs::symlink("../source/k.py", b.path().join("scripts/k.py")).unwrap();
        fs::create_dir_all(b.path().join("source")).unwrap();
        fs::write(b.path().join("source/k.py"), "def k(): pass\n").unwrap();
        fs::write(b.path().join("config.yaml"), "task_type: x\n").unwrap();
        fs::set_permissions(
            b.path().join("source/k.py"),
            fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        fs::set_permissions(b.path().join("source"), fs::Permissions::from_mode(0o700)).unwrap();
        let f = fs::File::options()
            .write(true)
            .open(b.path().join("config.yaml"))
            .unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
        // Outputs and caches are not inputs.
        fs::create_dir_all(b.path().join("build")).unwrap();
        fs::write(b.path().join("build/compile_report.json"), "{}").unwrap();
        fs::create_dir_all(b.path().join("source/__pycache__")).unwrap();
        fs::write(b.path().join("source/__pycache__/k.cpython-311.pyc"), "x").unwrap();
        assert_eq!(
            task_digest(a.path()).unwrap(),
            task_digest(b.path()).unwrap()
        );
    }

    #[test]
    fn sensitive_to_content_exec_bit_names_and_links() {
        let a = tempfile::tempdir().unwrap();
        make_tree(a.path());
        let base = task_digest(a.path()).unwrap();
        assert!(base.as_str().starts_with("sha256:") && base.as_str().len() == 71);

        fs::write(a.path().join("source/k.py"), "def k(): pasS\n").unwrap();
        let changed = task_digest(a.path()).unwrap();
        assert_ne!(base, changed);
        fs::write(a.path().join("source/k.py"), "def k(): pass\n").unwrap();
        assert_eq!(base, task_digest(a.path()).unwrap());

        fs::set_permissions(
            a.path().join("scripts/run.py"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_ne!(base, task_digest(a.path()).unwrap());
        fs::set_permissions(
            a.path().join("scripts/run.py"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();

        fs::remove_file(a.path().join("scripts/k.py")).unwrap();
        std::os::unix::fs::symlink("../source/other.py", a.path().join("scripts/k.py")).unwrap();
        assert_ne!(base, task_digest(a.path()).unwrap());
        fs::remove_file(a.path().join("scripts/k.py")).unwrap();
        std::os::unix::fs::symlink("../source/k.py", a.path().join("scripts/k.py")).unwrap();

        fs::create_dir(a.path().join("empty")).unwrap();
        assert_ne!(base, task_digest(a.path()).unwrap());
        fs::remove_dir(a.path().join("empty")).unwrap();
        assert_eq!(base, task_digest(a.path()).unwrap());

        // A nested build/ is part of the sources; only the top-level one is output.
        fs::create_dir_all(a.path().join("source/build")).unwrap();
        assert_ne!(base, task_digest(a.path()).unwrap());
    }

    #[test]
    fn tree_is_sorted_and_typed() {
        let a = tempfile::tempdir().unwrap();
        make_tree(a.path());
        let rels: Vec<_> = task_tree(a.path())
            .unwrap()
            .into_iter()
            .map(|e| e.rel)
            .collect();
        assert_eq!(
            rels,
            [
                "config.yaml",
                "scripts",
                "scripts/k.py",
                "scripts/run.py",
                "source",
                "source/k.py"
            ]
        );
    }
}
