//! Writes a layer tree as a deterministic tar, compressed, into the store, computing the
//! diff_id (sha256 of the tar) and the blob digest (sha256 of the compressed bytes) in one pass.

use std::io::{Read, Write};

use crate::compress::Compression;
use crate::digest::{Digest, HashingWriter};
use crate::error::{ImageError, Result};
use crate::layer::tree::{Content, EntryKind, LayerTree};
use crate::progress::Progress;
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltLayer {
    pub digest: Digest,
    pub diff_id: Digest,
    pub size: u64,
    pub media_type: String,
}

fn header(
    kind: tar::EntryType,
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: u64,
    size: u64,
) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(uid);
    h.set_gid(gid);
    h.set_mtime(mtime);
    h.set_size(size);
    h
}

/// Reads through and reports progress.
struct Counting<'a, R> {
    inner: R,
    progress: &'a dyn Progress,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

/// Writes the tar of `tree` to `out` (entries in the tree's order, which is sorted).
pub fn write_tar<W: Write>(
    tree: &LayerTree,
    mtime: u64,
    out: W,
    progress: &dyn Progress,
) -> Result<W> {
    let mut b = tar::Builder::new(out);
    let io = |path: &str, e: std::io::Error| ImageError::io(format!("layer entry {path}"), e);
    for e in tree.entries() {
        match &e.kind {
            EntryKind::Dir => {
                let mut h = header(tar::EntryType::Directory, e.mode, e.uid, e.gid, mtime, 0);
                b.append_data(&mut h, format!("{}/", e.path), std::io::empty())
                    .map_err(|err| io(&e.path, err))?;
            }
            EntryKind::Symlink { target } => {
                let mut h = header(tar::EntryType::Symlink, e.mode, e.uid, e.gid, mtime, 0);
                b.append_link(&mut h, &e.path, target)
                    .map_err(|err| io(&e.path, err))?;
            }
            EntryKind::Hardlink { target } => {
                let mut h = header(tar::EntryType::Link, e.mode, e.uid, e.gid, mtime, 0);
                b.append_link(&mut h, &e.path, target)
                    .map_err(|err| io(&e.path, err))?;
            }
            EntryKind::File { content, size } => {
                let mut h = header(tar::EntryType::Regular, e.mode, e.uid, e.gid, mtime, *size);
                match content {
                    Content::Bytes(bytes) => {
                        let r = Counting {
                            inner: &bytes[..],
                            progress,
                        };
                        b.append_data(&mut h, &e.path, r)
                            .map_err(|err| io(&e.path, err))?;
                    }
                    Content::Path(p) => {
                        let f = std::fs::File::open(p).map_err(|err| ImageError::io(p, err))?;
                        let actual = f.metadata().map_err(|err| ImageError::io(p, err))?.len();
                        if actual != *size {
                            return Err(ImageError::io(
                                p,
                                std::io::Error::other(format!(
                                    "file changed while the layer was built (size {size} → {actual})"
                                )),
                            ));
                        }
                        let r = Counting {
                            inner: f.take(*size),
                            progress,
                        };
                        b.append_data(&mut h, &e.path, r)
                            .map_err(|err| ImageError::io(p, err))?;
                    }
                }
            }
        }
    }
    b.into_inner().map_err(|e| ImageError::io("layer tar", e))
}

/// Builds the layer blob into the store: tar → (diff_id hash) → compressor → (blob hash) → file.
pub fn write_layer(
    store: &Store,
    tree: &LayerTree,
    mtime: u64,
    compression: Compression,
    progress: &dyn Progress,
) -> Result<BuiltLayer> {
    let (tmp_path, file) = store.staging_file()?;
    let sink = HashingWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
    let encoder = compression
        .encoder(sink)
        .map_err(|e| ImageError::io(&tmp_path, e))?;
    let tar_hasher = HashingWriter::new(encoder);
    let tar_hasher = write_tar(tree, mtime, tar_hasher, progress)?;
    let (encoder, diff_id, _) = tar_hasher.into_parts();
    let sink = encoder.finish().map_err(|e| ImageError::io(&tmp_path, e))?;
    let (buf, digest, size) = sink.into_parts();
    let file = buf
        .into_inner()
        .map_err(|e| ImageError::io(&tmp_path, e.into_error()))?;
    file.sync_all().map_err(|e| ImageError::io(&tmp_path, e))?;
    drop(file);
    store.commit_staged(&tmp_path, &digest)?;
    Ok(BuiltLayer {
        digest,
        diff_id,
        size,
        media_type: compression.media_type().to_string(),
    })
}
