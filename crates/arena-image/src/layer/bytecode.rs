//! Bytecode compiled at build time by the image's own interpreter: the layers below are
//! unpacked into a scratch directory, the image's Python runs there through the image's own
//! dynamic loader (no container, no root, no host Python), and `compileall` writes
//! checked-hash `.pyc` files (valid while the source's hash matches, whatever the mtimes) for
//! the given directories, one file after another in one process, so the bytes depend only on
//! the interpreter and the sources. The layer holds only those `__pycache__` files; a read-only
//! image root then starts Python without recompiling its modules in every process.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{ImageError, Result};
use crate::layer::tree::{EntryKind, LayerEntry, LayerTree};

/// The dynamic loader an x86-64 or aarch64 glibc userland keeps, inside `root`.
fn loader(root: &Path) -> Option<PathBuf> {
    [
        "usr/lib64/ld-linux-x86-64.so.2",
        "lib64/ld-linux-x86-64.so.2",
        "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        "usr/lib/ld-linux-aarch64.so.1",
        "lib/ld-linux-aarch64.so.1",
    ]
    .iter()
    .map(|p| root.join(p))
    .find(|p| p.exists())
}

/// Compiles the `.py` files below each of `dirs` (image paths) with the image's
/// `interpreter`, and returns the `.pyc` files made, as layer entries, and the files that do
/// not compile (image paths, sorted).
pub fn compile(
    root: &Path,
    interpreter: &str,
    dirs: &[String],
) -> Result<(LayerTree, Vec<String>)> {
    let fail = |m: String| ImageError::invalid(format!("bytecode layer ({interpreter})"), m);
    let ld =
        loader(root).ok_or_else(|| fail("the layers below hold no glibc dynamic loader".into()))?;
    let python = root.join(interpreter.trim_start_matches('/'));
    let python = std::fs::canonicalize(&python)
        .ok()
        .filter(|p| p.starts_with(root))
        .ok_or_else(|| fail(format!("{interpreter}: not in the layers below")))?;
    let libs: Vec<String> = [
        "usr/lib/x86_64-linux-gnu",
        "lib/x86_64-linux-gnu",
        "usr/lib/aarch64-linux-gnu",
        "usr/lib64",
        "usr/lib",
    ]
    .iter()
    .map(|d| root.join(d))
    .filter(|d| d.is_dir())
    .map(|d| d.display().to_string())
    .collect();
    let mut cmd = Command::new(&ld);
    cmd.arg("--library-path")
        .arg(libs.join(":"))
        .arg(&python)
        // No -E: PYTHONHOME below names the image's prefix (the loader, not the interpreter,
        // is this process's executable, so Python cannot find it from its own path); the
        // environment is cleared, so nothing else of the host's reaches it.
        .args(["-s", "-m", "compileall", "-q", "-f"])
        .args(["--invalidation-mode", "checked-hash"])
        // Paths inside the .pyc (tracebacks) are the image's, not the scratch directory's.
        .arg("-s")
        .arg(root)
        .args(["-p", "/"]);
    for d in dirs {
        cmd.arg(root.join(d.trim_start_matches('/')));
    }
    let out = cmd
        .env_clear()
        .env("PYTHONHOME", root.join("usr"))
        .env("SOURCE_DATE_EPOCH", "0")
        .env("PYTHONHASHSEED", "0")
        .output()
        .map_err(|e| fail(format!("running {}: {e}", ld.display())))?;
    // compileall exits 1 when some files do not compile (templates, Python 2 samples that
    // packages ship): those are named and left without bytecode, as pip leaves them; any
    // other failure (the interpreter did not run) fails the layer.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let uncompiled: Vec<String> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("*** Error compiling '"))
        .filter_map(|l| l.strip_suffix("'..."))
        .map(|p| {
            let p = Path::new(p);
            format!("/{}", p.strip_prefix(root).unwrap_or(p).display())
        })
        .collect();
    let only_some_files = out.status.code() == Some(1) && !uncompiled.is_empty();
    if !(out.status.success() || only_some_files) {
        return Err(fail(format!(
            "compileall failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let mut tree = LayerTree::new();
    for d in dirs {
        collect_pyc(root, &root.join(d.trim_start_matches('/')), &mut tree)?;
    }
    let mut uncompiled = uncompiled;
    uncompiled.sort();
    Ok((tree, uncompiled))
}

fn collect_pyc(root: &Path, dir: &Path, tree: &mut LayerTree) -> Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| ImageError::io(dir, e))?
        .flatten()
        .collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let p = e.path();
        let ft = e.file_type().map_err(|x| ImageError::io(&p, x))?;
        if ft.is_dir() {
            collect_pyc(root, &p, tree)?;
        } else if ft.is_file()
            && p.extension().is_some_and(|x| x == "pyc")
            && p.parent()
                .and_then(|d| d.file_name())
                .is_some_and(|n| n == "__pycache__")
        {
            let bytes = std::fs::read(&p).map_err(|x| ImageError::io(&p, x))?;
            let rel = p
                .strip_prefix(root)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            tree.insert(
                LayerEntry {
                    path: rel,
                    kind: EntryKind::bytes(bytes),
                    mode: 0o644,
                    uid: 0,
                    gid: 0,
                },
                "bytecode",
            )?;
        }
    }
    Ok(())
}
