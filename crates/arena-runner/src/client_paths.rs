//! Paths a client names (run directory, lockfile, agent file, hidden set) are read and written
//! by the runner, which may be root: a caller must not get through it what it could not do
//! itself. Admins (and the runner's own process) name any path. A local caller (`uid:N`) may
//! have the runner write only below a directory it owns, and read only what it could read
//! itself: every directory above searchable by it, the file readable by it (a directory: it
//! and everything below). A token caller may name only paths below the runner's
//! `--client-root` directories. Links are resolved first, so a link is judged by where it
//! points.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, RunnerError};
use crate::policy::Policy;
use crate::reach::{User, READ, SEARCH};

/// The most files below a directory a local caller names for reading (a hidden set holds one
/// per task and its manifest) that are checked one by one; more is refused.
const READ_TREE_LIMIT: usize = 100_000;

/// What the runner will do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    /// Create and write below it (a run directory).
    Write,
}

impl Policy {
    /// Refuses the first path `caller` may not have the runner use, naming the request field.
    pub fn check_paths(&self, caller: Option<&str>, paths: &[(&str, &Path, Access)]) -> Result<()> {
        let Some(caller) = caller else { return Ok(()) };
        if self.admins.iter().any(|a| a == caller) {
            return Ok(());
        }
        for (field, path, access) in paths {
            self.check_path(caller, field, path, *access)?;
        }
        Ok(())
    }

    fn check_path(&self, caller: &str, field: &str, path: &Path, access: Access) -> Result<()> {
        let refuse = |why: String| {
            Err(RunnerError::PermissionDenied(format!(
                "{field}: {}: {why}",
                path.display()
            )))
        };
        if !path.is_absolute() {
            return refuse(
                "paths sent to a runner are absolute (its working directory is not yours)".into(),
            );
        }
        // A path the runner cannot look at is the request's error, named by its field (found
        // by the gRPC requests' property test: it was an internal error naming the path alone).
        let unreadable = |at: &Path, e: std::io::Error| {
            RunnerError::invalid("request", field, format!("{}: {e}", at.display()))
        };
        // What exists of it, links resolved: the path itself for a read, its nearest existing
        // ancestor for a directory the runner will create.
        let existing = match access {
            Access::Read => path.canonicalize().map_err(|e| unreadable(path, e))?,
            Access::Write => nearest_existing(path).map_err(|e| match e {
                RunnerError::Run(arena_run::RunError::Io { path, error }) => {
                    unreadable(&path, error)
                }
                other => other,
            })?,
        };
        if let Some(uid) = caller
            .strip_prefix("uid:")
            .and_then(|u| u.parse::<u32>().ok())
        {
            let user = User::lookup(uid);
            // What the caller could not enter, the runner does not enter for it.
            if let Some(dir) = user
                .blocked_above(&existing)
                .map_err(|e| unreadable(&existing, e))?
            {
                return refuse(format!(
                    "{caller} may not enter {} (its mode lets it search no further)",
                    dir.display()
                ));
            }
            let meta = std::fs::metadata(&existing).map_err(|e| unreadable(&existing, e))?;
            return match access {
                Access::Read if meta.is_dir() => {
                    match user
                        .unreadable_below(&existing, READ_TREE_LIMIT)
                        .map_err(|e| unreadable(&existing, e))?
                    {
                        None => Ok(()),
                        Some(p) => refuse(format!("{caller} may not read {}", p.display())),
                    }
                }
                Access::Read if user.may(&meta, READ) => Ok(()),
                Access::Read => refuse(format!("{caller} may not read it")),
                Access::Write if meta.uid() == uid && meta.is_dir() && user.may(&meta, SEARCH) => {
                    Ok(())
                }
                Access::Write => refuse(format!(
                    "{} is not a directory {caller} owns",
                    existing.display()
                )),
            };
        }
        if self.client_roots.iter().any(|r| existing.starts_with(r)) {
            return Ok(());
        }
        refuse(format!(
            "outside the directories this runner lets {caller} name ({})",
            if self.client_roots.is_empty() {
                "none: start it with --client-root DIR".to_string()
            } else {
                self.client_roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ))
    }

    /// This policy with `roots` (canonicalized) as the directories token callers may name.
    pub fn with_client_roots(mut self, roots: &[PathBuf]) -> Result<Policy> {
        for r in roots {
            self.client_roots
                .push(r.canonicalize().map_err(|e| RunnerError::io(r, e))?);
        }
        Ok(self)
    }
}

/// The nearest ancestor of `path` (itself included) that exists, links resolved.
fn nearest_existing(path: &Path) -> Result<PathBuf> {
    let mut p = path;
    loop {
        if std::fs::symlink_metadata(p).is_ok() {
            return p.canonicalize().map_err(|e| RunnerError::io(p, e));
        }
        p = p.parent().unwrap_or(Path::new("/"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn policy(roots: &[PathBuf]) -> Policy {
        Policy {
            admins: vec!["uid:0".into()],
            ..Default::default()
        }
        .with_client_roots(roots)
        .unwrap()
    }

    #[test]
    fn admins_and_the_runner_itself_name_any_path() {
        let p = policy(&[]);
        let etc = Path::new("/etc/cron.d/x");
        p.check_paths(None, &[("run_dir", etc, Access::Write)])
            .unwrap();
        p.check_paths(Some("uid:0"), &[("run_dir", etc, Access::Write)])
            .unwrap();
    }

    /// A temporary directory every user may enter (tempfile makes them 0700).
    fn open_tempdir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    #[test]
    fn a_local_caller_writes_only_below_what_it_owns() {
        let d = open_tempdir();
        let mine = d.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::os::unix::fs::chown(&mine, Some(4242), Some(4242)).unwrap();
        let p = policy(&[]);
        p.check_paths(
            Some("uid:4242"),
            &[("run_dir", &mine.join("runs/r1"), Access::Write)],
        )
        .unwrap();
        // Root's directory (the temporary one), /etc, and a link planted in its own
        // directory that points at /etc.
        let e = p
            .check_paths(
                Some("uid:4242"),
                &[("run_dir", &d.path().join("other"), Access::Write)],
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("run_dir") && e.contains("not a directory uid:4242 owns"),
            "{e}"
        );
        assert!(p
            .check_paths(
                Some("uid:4242"),
                &[("run_dir", Path::new("/etc/x"), Access::Write)]
            )
            .is_err());
        let link = mine.join("escape");
        std::os::unix::fs::symlink("/etc", &link).unwrap();
        let e = p
            .check_paths(
                Some("uid:4242"),
                &[("run_dir", &link.join("r"), Access::Write)],
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("/etc is not a directory"), "{e}");
        assert!(p
            .check_paths(
                Some("uid:4242"),
                &[("run_dir", Path::new("relative"), Access::Write)]
            )
            .unwrap_err()
            .to_string()
            .contains("absolute"));
    }

    #[test]
    fn a_local_caller_reads_only_what_it_owns_or_everyone_may() {
        let d = open_tempdir();
        let secret = d.path().join("secret.toml");
        std::fs::write(&secret, "x").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let p = policy(&[]);
        let e = p
            .check_paths(Some("uid:4242"), &[("agent", &secret, Access::Read)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("agent") && e.contains("uid:4242 may not read it"),
            "{e}"
        );
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        p.check_paths(Some("uid:4242"), &[("agent", &secret, Access::Read)])
            .unwrap();
    }

    /// A hidden set everyone may read, in a directory only its owner may enter: a caller that
    /// could not reach it itself is refused, naming the directory; its owner is not.
    #[test]
    fn a_local_caller_reads_nothing_it_could_not_reach_itself() {
        let d = open_tempdir();
        let private = d.path().join("private");
        let hidden = private.join("hidden");
        std::fs::create_dir_all(&hidden).unwrap();
        let manifest = hidden.join("manifest.json");
        std::fs::write(&manifest, "{}").unwrap();
        for (p, m) in [(&private, 0o700), (&hidden, 0o755), (&manifest, 0o644)] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        }
        std::os::unix::fs::chown(&private, Some(4343), Some(4343)).unwrap();
        let p = policy(&[]);
        for (field, path) in [("hidden_set", &hidden), ("agent", &manifest)] {
            let e = p
                .check_paths(Some("uid:4242"), &[(field, path.as_path(), Access::Read)])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(field)
                    && e.contains(&format!("uid:4242 may not enter {}", private.display())),
                "{e}"
            );
        }
        p.check_paths(Some("uid:4343"), &[("hidden_set", &hidden, Access::Read)])
            .unwrap();
        // Entered, a file below it that only its owner may read is refused too.
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&manifest, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = p
            .check_paths(Some("uid:4242"), &[("hidden_set", &hidden, Access::Read)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("may not read {}", manifest.display())),
            "{e}"
        );
        std::fs::set_permissions(&manifest, std::fs::Permissions::from_mode(0o644)).unwrap();
        p.check_paths(Some("uid:4242"), &[("hidden_set", &hidden, Access::Read)])
            .unwrap();
    }

    #[test]
    fn token_callers_name_only_paths_below_client_roots() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("lab");
        std::fs::create_dir(&root).unwrap();
        let p = policy(std::slice::from_ref(&root));
        p.check_paths(
            Some("token:alice"),
            &[("run_dir", &root.join("runs/1"), Access::Write)],
        )
        .unwrap();
        let e = p
            .check_paths(
                Some("token:alice"),
                &[("image_lock", Path::new("/etc/passwd"), Access::Read)],
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("image_lock") && e.contains("outside"), "{e}");
        let e = policy(&[])
            .check_paths(
                Some("token:alice"),
                &[("run_dir", &root.join("r"), Access::Write)],
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("--client-root"), "{e}");
    }
}
