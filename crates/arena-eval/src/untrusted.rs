//! Reading what a container wrote, as something hostile wrote it. Every path is opened
//! beneath its root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: no symbolic link
//! is followed and nothing outside the root is reached, whatever a container left in the
//! tree. Only regular files are read (a FIFO or a device is refused, never opened for a
//! blocking read), up to a size cap; a sparse file is judged by its apparent size.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstat, Mode, SFlag};

/// Why a file written by a container was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("missing")]
    Missing,
    #[error("not a regular file (a link, a FIFO, a device or a directory)")]
    NotRegular,
    #[error("{size} bytes, over the limit of {cap}")]
    TooLarge { size: u64, cap: u64 },
    #[error("goes through a symbolic link or outside its directory")]
    Escapes,
    #[error("{0}")]
    Io(String),
}

fn beneath() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH
        | ResolveFlag::RESOLVE_NO_SYMLINKS
        | ResolveFlag::RESOLVE_NO_MAGICLINKS
}

fn refusal(e: nix::Error) -> Refusal {
    match e {
        nix::Error::ENOENT => Refusal::Missing,
        nix::Error::ELOOP | nix::Error::EXDEV => Refusal::Escapes,
        // O_NOFOLLOW on a last component that is a link.
        nix::Error::ENOTDIR => Refusal::Escapes,
        e => Refusal::Io(e.desc().to_string()),
    }
}

/// Opens `root` itself (a directory, not through a link).
pub fn open_root(root: &Path) -> Result<OwnedFd, Refusal> {
    nix::fcntl::open(
        root,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(refusal)
}

/// Opens `rel` beneath the directory `dir` (flags for a file: read-only, non-blocking).
pub fn open_beneath(dir: &OwnedFd, rel: &Path, flags: OFlag) -> Result<OwnedFd, Refusal> {
    let how = OpenHow::new()
        .flags(flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(beneath());
    openat2(dir, rel, how).map_err(refusal)
}

/// Reads the regular file `rel` beneath `root`, at most `cap` bytes.
pub fn read_beneath(root: &Path, rel: &Path, cap: u64) -> Result<Vec<u8>, Refusal> {
    let dir = open_root(root)?;
    // Non-blocking: opening a FIFO for reading must not wait for a writer.
    let fd = open_beneath(&dir, rel, OFlag::O_RDONLY | OFlag::O_NONBLOCK)?;
    let st = fstat(&fd).map_err(refusal)?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(Refusal::NotRegular);
    }
    let size = st.st_size.max(0) as u64;
    if size > cap {
        return Err(Refusal::TooLarge { size, cap });
    }
    let mut out = Vec::with_capacity(size as usize);
    std::fs::File::from(fd)
        .take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| Refusal::Io(e.to_string()))?;
    if out.len() as u64 > cap {
        return Err(Refusal::TooLarge {
            size: out.len() as u64,
            cap,
        });
    }
    Ok(out)
}

/// Reads `rel` beneath `root` as UTF-8 text, at most `cap` bytes.
pub fn read_text_beneath(root: &Path, rel: &Path, cap: u64) -> Result<String, Refusal> {
    String::from_utf8(read_beneath(root, rel, cap)?).map_err(|_| Refusal::Io("not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_everything_else_refused() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::write(r.join("ok.json"), "{}").unwrap();
        assert_eq!(read_beneath(r, Path::new("ok.json"), 10).unwrap(), b"{}");
        std::fs::write(r.join("big"), vec![b'x'; 11]).unwrap();
        assert_eq!(
            read_beneath(r, Path::new("big"), 10),
            Err(Refusal::TooLarge { size: 11, cap: 10 })
        );
        std::os::unix::fs::symlink("/etc/hostname", r.join("link")).unwrap();
        assert_eq!(
            read_beneath(r, Path::new("link"), 100),
            Err(Refusal::Escapes)
        );
        std::fs::create_dir(r.join("sub")).unwrap();
        std::os::unix::fs::symlink(r.join("sub"), r.join("linkdir")).unwrap();
        std::fs::write(r.join("sub/f"), "x").unwrap();
        assert_eq!(
            read_beneath(r, Path::new("linkdir/f"), 100),
            Err(Refusal::Escapes)
        );
        assert_eq!(
            read_beneath(r, Path::new("../x"), 100),
            Err(Refusal::Escapes)
        );
        nix::unistd::mkfifo(&r.join("fifo"), Mode::S_IRWXU).unwrap();
        // A FIFO with no writer: refused at once, never waited on.
        assert_eq!(
            read_beneath(r, Path::new("fifo"), 100),
            Err(Refusal::NotRegular)
        );
        assert_eq!(
            read_beneath(r, Path::new("sub"), 100),
            Err(Refusal::NotRegular)
        );
        assert_eq!(
            read_beneath(r, Path::new("none"), 100),
            Err(Refusal::Missing)
        );
        // A sparse file is as large as it says.
        let f = std::fs::File::create(r.join("sparse")).unwrap();
        f.set_len(1 << 40).unwrap();
        assert!(matches!(
            read_beneath(r, Path::new("sparse"), 1 << 20),
            Err(Refusal::TooLarge { .. })
        ));
    }
}
