//! The run's secrets taken out of what its agent left, once the agent's container has ended:
//! its logs and its workspace (from which the candidate is staged and `workspace.kept` is
//! copied). A CLI that prints its configuration, or writes it into a file of the workspace,
//! would otherwise leave the submitter's key in the run directory. Values are found verbatim
//! (arena_run::Secrets::redact); the agent can read its key, and one that encodes it on purpose
//! is not stopped (docs say so).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, RunnerError};

/// Files larger than this are never read: nothing of that size leaves the workspace (staging
/// refuses files over 16 MiB, `workspace.kept` keeps 64 MiB in all).
const MAX_FILE: u64 = 64 << 20;

/// Rewrites every regular file of `files` and below `workspace` (links are not followed, other
/// kinds of file are left alone) that holds a value of `secrets`. Returns the files rewritten
/// and the names found in each.
pub(crate) fn scrub(
    secrets: &arena_run::Secrets,
    files: &[&Path],
    workspace: &Path,
) -> Result<Vec<(PathBuf, Vec<String>)>> {
    let mut done = Vec::new();
    if secrets.is_empty() {
        return Ok(done);
    }
    for path in files {
        if let Some(names) = scrub_file(secrets, path, read_file(path))? {
            done.push((path.to_path_buf(), names));
        }
    }
    for rel in super::files::regular_files(workspace) {
        // Read beneath the workspace (openat2): nothing the agent left resolves outside it.
        let bytes = arena_eval::untrusted::read_beneath(workspace, &rel, MAX_FILE).ok();
        let path = workspace.join(&rel);
        if let Some(names) = scrub_file(secrets, &path, bytes)? {
            done.push((path, names));
        }
    }
    Ok(done)
}

/// A log file's bytes: a regular file (not a link) of at most [`MAX_FILE`] bytes.
fn read_file(path: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_FILE {
        return None;
    }
    std::fs::read(path).ok()
}

/// Rewrites `path`, whose bytes were read as `bytes`, where they hold a secret; the names
/// found.
fn scrub_file(
    secrets: &arena_run::Secrets,
    path: &Path,
    bytes: Option<Vec<u8>>,
) -> Result<Option<Vec<String>>> {
    let Some((clean, names)) = bytes.and_then(|b| secrets.redact(&b)) else {
        return Ok(None);
    };
    // O_NOFOLLOW: a link put in the file's place is not written through.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| RunnerError::io(path, e))?;
    f.write_all(&clean).map_err(|e| RunnerError::io(path, e))?;
    Ok(Some(names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_leave_the_workspace_and_logs_and_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let (ws, outside) = (tmp.path().join("ws"), tmp.path().join("outside"));
        std::fs::create_dir_all(ws.join("deep/er")).unwrap();
        std::fs::write(ws.join("deep/er/config.json"), "{\"key\": \"sk-canary\"}").unwrap();
        std::fs::write(ws.join("clean.c"), "int x;").unwrap();
        std::fs::write(&outside, "sk-canary").unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
        let log = tmp.path().join("agent.stdout.log");
        std::fs::write(&log, "KEY=sk-canary\n").unwrap();
        let secrets = arena_run::Secrets::new(
            [("KEY".to_string(), "sk-canary".to_string())]
                .into_iter()
                .collect(),
            "test",
        )
        .unwrap();
        let done = scrub(&secrets, &[&log], &ws).unwrap();
        assert_eq!(done.len(), 2, "{done:?}");
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "KEY=[redacted KEY]\n"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("deep/er/config.json")).unwrap(),
            "{\"key\": \"[redacted KEY]\"}"
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "sk-canary");
        assert_eq!(
            std::fs::read_to_string(ws.join("clean.c")).unwrap(),
            "int x;"
        );
        // No secrets: nothing is read.
        let none = arena_run::Secrets::default();
        assert!(scrub(&none, &[&outside], &ws).unwrap().is_empty());
    }
}
