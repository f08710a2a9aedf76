//! Sized scratch file systems on the host: a tmpfs of a given size mounted at a directory the
//! runner then binds into a container (the agent's workspace), so that a container cannot
//! fill the host's disk through it. Its pages count against the container's memory limit
//! once the container writes them.

use std::path::Path;

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

pub fn mount_tmpfs(dir: &Path, bytes: u64) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| RuntimeError::io(dir, e))?;
    if is_mount_point(dir) {
        return Err(RuntimeError::invalid(
            dir.display().to_string(),
            "is a mount point already",
        ));
    }
    let opts = format!("size={bytes},mode=0755");
    mount(
        Some("arena-scratch"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(opts.as_str()),
    )
    .map_err(|e| RuntimeError::io(dir, std::io::Error::from(e)))
}

/// Unmounts every mount at `dir` (a lazy unmount: a process still inside does not stop it).
pub fn unmount(dir: &Path) -> Result<()> {
    while is_mount_point(dir) {
        umount2(dir, MntFlags::MNT_DETACH)
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
}
