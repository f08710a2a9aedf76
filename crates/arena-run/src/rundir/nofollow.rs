//! A run directory's path, walked from `/` one directory at a time through descriptors
//! (openat, mkdirat), so that no symbolic link a caller planted is followed: the runner is root
//! and writes where the path leads, and `create_dir_all` follows a link planted after the
//! runner checked the path (client_paths.rs) as readily as one planted before. A link is
//! followed only where nobody else could have planted or replaced it: owned by root or by this
//! process's own user, in a directory of one of them that nobody else may write (or that has
//! the sticky bit, which keeps others from replacing a link they do not own). Any other link
//! on the way refuses the path.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, readlinkat, OFlag, AT_FDCWD};
use nix::sys::stat::{fstat, fstatat, mkdirat, FileStat, Mode, SFlag};

use crate::error::{Result, RunError};

/// The most links followed on the way (as the kernel's own limit).
const MAX_LINKS: u32 = 40;

fn planted(path: &Path, what: &str) -> RunError {
    RunError::invalid(
        path.display(),
        "(run directory)",
        format!("{what}: refused (the runner follows no link on the way to a run directory that someone else could have planted)"),
    )
}

fn io(path: &Path, e: Errno) -> RunError {
    RunError::io(path, std::io::Error::from(e))
}

fn open_dir(at: impl AsFd, name: &OsStr, path: &Path) -> Result<OwnedFd> {
    openat(
        at,
        name,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        // Replaced by a link or a file since it was looked at.
        Errno::ELOOP | Errno::ENOTDIR => planted(path, "not a directory"),
        e => io(path, e),
    })
}

/// Whether the link `link` in the directory `dir` could only have been made by root or by
/// this process's user.
fn trusted(dir: &FileStat, link: &FileStat) -> bool {
    let me = nix::unistd::geteuid().as_raw();
    let ours = |uid: u32| uid == 0 || uid == me;
    let sticky = dir.st_mode & 0o1000 != 0;
    ours(link.st_uid) && ours(dir.st_uid) && (dir.st_mode & 0o022 == 0 || sticky)
}

/// Walks `path` (made absolute against the working directory) from `/`, making each missing
/// directory with `create` (else a missing one ends the walk), and returns the path it
/// reached with no link in it. A link nobody else could have planted is followed; any other
/// link, or a file where a directory should be, is refused naming it.
pub(super) fn walk(path: &Path, create: bool) -> Result<PathBuf> {
    let abs = std::path::absolute(path).map_err(|e| RunError::io(path, e))?;
    let mut todo: VecDeque<OsString> = VecDeque::new();
    push_front(&mut todo, &abs);
    let root = || -> Result<OwnedFd> {
        openat(
            AT_FDCWD,
            "/",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io(Path::new("/"), e))
    };
    let mut fd = root()?;
    let mut at = PathBuf::from("/");
    // The directories above `fd`, for `..`.
    let mut above: Vec<OwnedFd> = Vec::new();
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            if let Some(parent) = above.pop() {
                fd = parent;
                at.pop();
            }
            continue;
        }
        let here = at.join(&name);
        let st = match fstatat(
            &fd,
            name.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => st,
            Err(Errno::ENOENT) if create => {
                match mkdirat(&fd, name.as_os_str(), Mode::from_bits_truncate(0o777)) {
                    // Made by someone else meanwhile: looked at again like any other.
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(io(&here, e)),
                }
                todo.push_front(name);
                continue;
            }
            Err(Errno::ENOENT) => {
                return Ok(at.join(todo.iter().fold(PathBuf::from(&name), |p, n| p.join(n))))
            }
            Err(e) => return Err(io(&here, e)),
        };
        let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
        if kind == SFlag::S_IFLNK {
            let dir = fstat(&fd).map_err(|e| io(&at, e))?;
            if !trusted(&dir, &st) {
                return Err(planted(&here, "a symbolic link"));
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(io(&here, Errno::ELOOP));
            }
            let target = readlinkat(&fd, name.as_os_str()).map_err(|e| io(&here, e))?;
            let target = PathBuf::from(target);
            if target.is_absolute() {
                fd = root()?;
                at = PathBuf::from("/");
                above.clear();
            }
            push_front(&mut todo, &target);
            continue;
        }
        if kind != SFlag::S_IFDIR {
            return Err(planted(&here, "not a directory"));
        }
        let next = open_dir(&fd, &name, &here)?;
        above.push(std::mem::replace(&mut fd, next));
        at = here;
    }
    Ok(at)
}

/// `path`'s components (`..` kept, `.` and `/` dropped) in front of what is left to walk.
fn push_front(todo: &mut VecDeque<OsString>, path: &Path) {
    for c in path.components().rev() {
        match c {
            Component::Normal(n) => todo.push_front(n.to_os_string()),
            Component::ParentDir => todo.push_front("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
}
