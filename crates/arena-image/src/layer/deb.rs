//! Debian packages: the `ar` container and its `data.tar.*` member, unpacked the way a
//! first-stage debootstrap does (files only, no maintainer scripts).

use std::io::Read;
use std::path::Path;

use crate::compress::decompressing_reader;
use crate::error::{ImageError, Result};
use crate::layer::archive::{read_tar_into, Placement};
use crate::layer::tree::LayerTree;

const AR_MAGIC: &[u8] = b"!<arch>\n";

/// Returns the bytes of the `data.tar[.xz|.zst|.gz]` member of a `.deb` (read with the `ar`
/// crate: a `.deb` is a common-format ar archive).
pub fn data_member(path: &Path, deb: &[u8]) -> Result<Vec<u8>> {
    let bad = |m: String| ImageError::Archive {
        path: path.to_path_buf(),
        message: m,
    };
    if !deb.starts_with(AR_MAGIC) {
        return Err(bad("not a Debian package (no ar header)".into()));
    }
    let mut archive = ar::Archive::new(deb);
    while let Some(entry) = archive.next_entry() {
        let mut entry = entry.map_err(|e| bad(format!("corrupt ar member header: {e}")))?;
        let name = String::from_utf8_lossy(entry.header().identifier())
            .trim_end_matches('/')
            .to_string();
        if !name.starts_with("data.tar") {
            continue;
        }
        let size = entry.header().size();
        let mut data = Vec::with_capacity(size.min(deb.len() as u64) as usize);
        entry
            .read_to_end(&mut data)
            .map_err(|e| bad(format!("member `{name}`: {e}")))?;
        if data.len() as u64 != size {
            return Err(bad(format!("member `{name}` is truncated")));
        }
        return Ok(data);
    }
    Err(bad("no data.tar member".into()))
}

/// Debian bookworm merges /bin, /sbin and /lib* into /usr: rewrite those paths as dpkg on a
/// merged-usr system would land them.
pub fn merged_usr(path: &str) -> String {
    let first = path.split('/').next().unwrap_or("");
    if matches!(first, "bin" | "sbin" | "lib" | "lib32" | "lib64" | "libx32") {
        format!("usr/{path}")
    } else {
        path.to_string()
    }
}

/// Unpacks one package's files into `tree`.
pub fn unpack_into(
    tree: &mut LayerTree,
    path: &Path,
    deb: &[u8],
    merge_usr: bool,
    origin: &str,
) -> Result<usize> {
    let data = data_member(path, deb)?;
    let reader = decompressing_reader(std::io::BufReader::new(&data[..]))
        .map_err(|e| ImageError::io(path, e))?;
    let keep = |p: &str| p.to_string();
    let rewrite: &dyn Fn(&str) -> String = if merge_usr { &merged_usr } else { &keep };
    read_tar_into(
        tree,
        reader.take(u64::MAX),
        path,
        &Placement {
            target: "/",
            rewrite,
            uid: 0,
            gid: 0,
            origin,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_usr_paths() {
        assert_eq!(merged_usr("bin/sh"), "usr/bin/sh");
        assert_eq!(merged_usr("lib64/ld.so"), "usr/lib64/ld.so");
        assert_eq!(merged_usr("usr/bin/x"), "usr/bin/x");
        assert_eq!(merged_usr("binary/x"), "binary/x");
        assert_eq!(merged_usr("etc/x"), "etc/x");
    }

    #[test]
    fn refuses_non_deb_and_truncated() {
        let e = data_member(Path::new("p.deb"), b"hello")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "p.deb: not a Debian package (no ar header)");
        let mut deb = AR_MAGIC.to_vec();
        deb.extend_from_slice(
            format!(
                "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                "data.tar.xz", 0, 0, 0, 644, 999
            )
            .as_bytes(),
        );
        deb.extend_from_slice(b"short");
        let e = data_member(Path::new("p.deb"), &deb)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "p.deb: member `data.tar.xz` is truncated");
    }
}
