//! What a local user could reach on its own, read from mode bits: the runner (root) reads and
//! writes for callers named by uid, and must not do for one what it could not do itself. A
//! file is reachable only through directories the user may search, each judged by the bits
//! that apply to it (owner, else group, else other: the first that matches decides, as the
//! kernel decides). The user's groups are its primary group and the group database's; groups
//! given some other way (a login's newgrp) are not counted, so a caller may be refused what
//! it could reach, never given what it could not.

use std::ffi::CStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Read, write and search/execute, as the low bits of a mode.
pub const READ: u32 = 4;
pub const SEARCH: u32 = 1;

/// A local user and the groups its permission checks count.
#[derive(Debug, Clone)]
pub struct User {
    pub uid: u32,
    pub groups: Vec<u32>,
}

impl User {
    /// `uid` with its groups from the user database (none where it has no entry there).
    pub fn lookup(uid: u32) -> User {
        User {
            uid,
            groups: groups_of(uid),
        }
    }

    /// Whether a file with `meta` grants this user every bit of `want` (READ, SEARCH).
    pub fn may(&self, meta: &std::fs::Metadata, want: u32) -> bool {
        let mode = meta.mode();
        if self.uid == 0 {
            // Root: reads and searches anything, runs what someone may run.
            return want & SEARCH == 0 || meta.is_dir() || mode & 0o111 != 0;
        }
        let bits = if meta.uid() == self.uid {
            mode >> 6
        } else if self.groups.contains(&meta.gid()) {
            mode >> 3
        } else {
            mode
        };
        bits & want == want
    }

    /// The first directory from `/` down to `path`'s parent that this user may not search,
    /// where there is one (`path` has no links: canonical).
    pub fn blocked_above(&self, path: &Path) -> std::io::Result<Option<PathBuf>> {
        for dir in path
            .ancestors()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            let meta = std::fs::metadata(dir)?;
            if !meta.is_dir() || !self.may(&meta, SEARCH) {
                return Ok(Some(dir.to_path_buf()));
            }
        }
        Ok(None)
    }

    /// The first file at or below `path` (canonical) this user may not read (a directory: read
    /// and search), where there is one; at most `limit` entries are looked at, and more is an
    /// error.
    pub fn unreadable_below(&self, path: &Path, limit: usize) -> std::io::Result<Option<PathBuf>> {
        let mut stack = vec![path.to_path_buf()];
        let mut seen = 0;
        while let Some(p) = stack.pop() {
            seen += 1;
            if seen > limit {
                return Err(std::io::Error::other(format!(
                    "more than {limit} files below {}",
                    path.display()
                )));
            }
            let meta = std::fs::symlink_metadata(&p)?;
            if meta.file_type().is_symlink() {
                // Judged where it points, as the runner would read it.
                let to = p.canonicalize()?;
                if let Some(b) = self.blocked_above(&to)? {
                    return Ok(Some(b));
                }
                stack.push(to);
                continue;
            }
            let want = if meta.is_dir() { READ | SEARCH } else { READ };
            if !self.may(&meta, want) {
                return Ok(Some(p));
            }
            if meta.is_dir() {
                for e in std::fs::read_dir(&p)? {
                    stack.push(e?.path());
                }
            }
        }
        Ok(None)
    }
}

/// `uid`'s primary group and the groups the group database lists it in (empty where the user
/// database has no entry for it).
fn groups_of(uid: u32) -> Vec<u32> {
    let mut buf = vec![0u8; 16 << 10];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live buffer of the size given; the result is read only
    // where getpwuid_r says it found the entry.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Vec::new();
    }
    let gid = pwd.pw_gid;
    // SAFETY: pw_name points into `buf`, a NUL-terminated string getpwuid_r wrote.
    let name = unsafe { CStr::from_ptr(pwd.pw_name) }.to_owned();
    let mut n: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let want = n;
        // SAFETY: `groups` holds `n` entries; getgrouplist writes at most that many and says
        // how many there are.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n as usize);
            return groups;
        }
        if n <= want {
            return vec![gid];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_directory_closed_to_a_user_blocks_what_lies_below_it() {
        let d = tempfile::tempdir().unwrap();
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(d.path(), 0o755);
        let closed = d.path().join("closed");
        std::fs::create_dir_all(closed.join("open")).unwrap();
        std::fs::write(closed.join("open/f"), "x").unwrap();
        mode(&closed, 0o700);
        mode(&closed.join("open"), 0o755);
        mode(&closed.join("open/f"), 0o644);
        let stranger = User {
            uid: 4242,
            groups: vec![4242],
        };
        let f = closed.join("open/f");
        assert_eq!(stranger.blocked_above(&f).unwrap(), Some(closed.clone()));
        // Its owner passes; a group that may search passes too.
        std::os::unix::fs::chown(&closed, Some(4242), None).unwrap();
        assert_eq!(stranger.blocked_above(&f).unwrap(), None);
        std::os::unix::fs::chown(&closed, Some(0), Some(4343)).unwrap();
        mode(&closed, 0o710);
        let member = User {
            uid: 4242,
            groups: vec![4343],
        };
        assert_eq!(member.blocked_above(&f).unwrap(), None);
        assert_eq!(stranger.blocked_above(&f).unwrap(), Some(closed.clone()));
        // Below a directory: every file must be readable.
        mode(&f, 0o600);
        assert_eq!(
            member.unreadable_below(&closed.join("open"), 100).unwrap(),
            Some(f)
        );
    }
}
