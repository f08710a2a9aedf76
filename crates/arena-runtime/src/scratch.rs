//! Sized scratch file systems on the host: a tmpfs of a given size mounted at a directory the
//! runner then binds into a container (the agent's workspace), so that a container cannot
//! fill the host's disk through it. Its pages count against the container's memory limit
//! once the container writes them.

use std::path::Path;

use std::os::fd::AsRawFd;

use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag, AT_FDCWD};
use nix::mount::{mount, umount2, MntFlags, MsFlags};

use crate::error::{Result, RuntimeError};

/// Whether `dir` is a mount point (its entry in /proc/self/mountinfo).
pub fn is_mount_point(dir: &Path) -> bool {
    let Ok(canon) = dir.canonicalize() else {
        return false;
    };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = canon.to_string_lossy().replace(' ', "\\040");
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mp| mp == want)
}

/// Creates the directories of `dir` (absolute) that are missing, refusing a symbolic link or a
/// non-directory on the way.
fn create_dirs_without_links(dir: &Path) -> Result<()> {
    let mut p = std::path::PathBuf::from("/");
    for c in dir.components().skip(1) {
        p.push(c);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(RuntimeError::invalid(
                    p.display().to_string(),
                    "is a symbolic link: a scratch file system is mounted only where no link leads",
                ))
            }
            Ok(m) if !m.is_dir() => {
                return Err(RuntimeError::invalid(
                    p.display().to_string(),
                    "is not a directory",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::create_dir(&p) {
                Ok(()) => {}
                // Made by a concurrent task run in between: it must be a real directory too.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let m = std::fs::symlink_metadata(&p).map_err(|e| RuntimeError::io(&p, e))?;
                    if m.file_type().is_symlink() || !m.is_dir() {
                        return Err(RuntimeError::invalid(
                            p.display().to_string(),
                            "appeared as a symbolic link or a non-directory while being made",
                        ));
                    }
                }
                Err(e) => return Err(RuntimeError::io(&p, e)),
            },
            Err(e) => return Err(RuntimeError::io(&p, e)),
        }
    }
    Ok(())
}

/// Mounts a tmpfs of `bytes` at `dir`. The directory is opened first with no symbolic link
/// allowed anywhere on its path, and the mount goes onto what was opened
/// (`/proc/self/fd/N`), so a link swapped in meanwhile cannot move it elsewhere.
pub fn mount_tmpfs(dir: &Path, bytes: u64) -> Result<()> {
    if !dir.is_absolute() {
        return Err(RuntimeError::invalid(
            dir.display().to_string(),
            "a scratch mount point is an absolute path",
        ));
    }
    create_dirs_without_links(dir)?;
    if is_mount_point(dir) {
        return Err(RuntimeError::invalid(
            dir.display().to_string(),
            "is a mount point already",
        ));
    }
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = openat2(AT_FDCWD, dir, how).map_err(|e| {
        RuntimeError::invalid(
            dir.display().to_string(),
            format!("cannot be opened without following a link ({})", e.desc()),
        )
    })?;
    let target = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let opts = format!("size={bytes},mode=0755");
    mount(
        Some("arena-scratch"),
        target.as_str(),
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(opts.as_str()),
    )
    .map_err(|e| RuntimeError::io(dir, std::io::Error::from(e)))
}

/// Unmounts every mount at `dir` (a lazy unmount: a process still inside does not stop it;
/// a link at `dir` is not followed).
pub fn unmount(dir: &Path) -> Result<()> {
    while is_mount_point(dir) {
        umount2(dir, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW)
            .map_err(|e| RuntimeError::io(dir, std::io::Error::from(e)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As root only (mounting needs it); elsewhere there is nothing to check.
    #[test]
    fn a_sized_tmpfs_refuses_writes_past_its_size_and_unmounts() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        mount_tmpfs(&ws, 1 << 20).unwrap();
        assert!(is_mount_point(&ws));
        assert!(mount_tmpfs(&ws, 1 << 20).is_err(), "mounted twice");
        let big = std::fs::write(ws.join("fill"), vec![0u8; 2 << 20]);
        assert!(big.is_err(), "a 2 MiB write fit in 1 MiB");
        unmount(&ws).unwrap();
        assert!(!is_mount_point(&ws));
        assert!(!ws.join("fill").exists());
        unmount(&ws).unwrap();
    }

    #[test]
    fn a_link_on_the_way_is_never_mounted_through() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        let planted = d.path().join("r0");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        for dir in [planted.clone(), planted.join("workspace")] {
            let e = mount_tmpfs(&dir, 1 << 20).unwrap_err().to_string();
            assert!(e.contains("symbolic link"), "{e}");
        }
        assert!(!is_mount_point(&victim));
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
        assert!(mount_tmpfs(Path::new("relative"), 1).is_err());
    }
}
