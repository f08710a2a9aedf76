//! Deterministic compression of layer tars: fixed settings, no timestamps or names in headers.

use std::io::Write;

use serde::{Deserialize, Serialize};

pub const MEDIA_TYPE_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
pub const MEDIA_TYPE_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const MEDIA_TYPE_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// zstd level 3 (zstd's default), no checksum, no content size, always in zstd's multi-threaded
/// mode: its output depends on the bytes and the zstd version (pinned by Cargo.lock) but not on
/// the number of workers (≥ 1), so every machine writes the same frames, each at its own speed.
/// (zstd's single-threaded mode writes different frames: it is never used.)
const ZSTD_LEVEL: i32 = 3;

fn zstd_workers() -> u32 {
    std::env::var("ARENA_ZSTD_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
        .max(1)
}
/// gzip level 6, mtime 0, no file name, OS byte 255 ("unknown") on every machine.
const GZIP_LEVEL: u32 = 6;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    #[default]
    Zstd,
    Gzip,
}

impl Compression {
    pub fn media_type(self) -> &'static str {
        match self {
            Compression::Zstd => MEDIA_TYPE_LAYER_ZSTD,
            Compression::Gzip => MEDIA_TYPE_LAYER_GZIP,
        }
    }

    pub fn encoder<W: Write>(self, w: W) -> std::io::Result<Encoder<W>> {
        Ok(match self {
            Compression::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(w, ZSTD_LEVEL)?;
                e.multithread(zstd_workers())?;
                e.include_checksum(false)?;
                e.include_contentsize(false)?;
                Encoder::new(Inner::Zstd(e))
            }
            Compression::Gzip => Encoder::new(Inner::Gzip(
                flate2::GzBuilder::new()
                    .mtime(0)
                    .operating_system(255)
                    .write(w, flate2::Compression::new(GZIP_LEVEL)),
            )),
        })
    }
}

enum Inner<W: Write> {
    Zstd(zstd::stream::write::Encoder<'static, W>),
    Gzip(flate2::write::GzEncoder<W>),
}

impl<W: Write> Inner<W> {
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Inner::Zstd(e) => e.write_all(buf),
            Inner::Gzip(e) => e.write_all(buf),
        }
    }
}

/// Size of every write the compressor sees (but the last).
const CHUNK: usize = 64 * 1024;

/// A compressor fed in fixed-size chunks: some deflate implementations (zlib-rs) emit
/// different blocks for the same bytes written in different slices, so the slicing must not
/// depend on the caller (buffer sizes of the tar writer, of `io::copy`, of a Rust version).
pub struct Encoder<W: Write> {
    inner: Inner<W>,
    buf: Vec<u8>,
}

impl<W: Write> Encoder<W> {
    fn new(inner: Inner<W>) -> Self {
        Encoder {
            inner,
            buf: Vec::with_capacity(CHUNK),
        }
    }

    pub fn finish(mut self) -> std::io::Result<W> {
        if !self.buf.is_empty() {
            self.inner.write_all(&self.buf)?;
        }
        match self.inner {
            Inner::Zstd(e) => e.finish(),
            Inner::Gzip(e) => e.finish(),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let n = data.len();
        while !data.is_empty() {
            let take = (CHUNK - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() == CHUNK {
                self.inner.write_all(&self.buf)?;
                self.buf.clear();
            }
        }
        Ok(n)
    }

    /// Does not push a partial chunk: that would make the output depend on when flush is called.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A reader that undoes whatever compression the first bytes announce (zstd, gzip, xz, or none).
pub fn decompressing_reader<'a, R: std::io::BufRead + 'a>(
    mut r: R,
) -> std::io::Result<Box<dyn std::io::Read + 'a>> {
    let head = r.fill_buf()?;
    Ok(if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::stream::read::Decoder::with_buffer(r)?)
    } else if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(r))
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        Box::new(xz2::bufread::XzDecoder::new(r))
    } else {
        Box::new(r)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn zstd_with(workers: u32, data: &[u8]) -> Vec<u8> {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL).unwrap();
        e.multithread(workers).unwrap();
        e.include_checksum(false).unwrap();
        e.include_contentsize(false).unwrap();
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn zstd_output_does_not_depend_on_worker_count() {
        // 40 MB, several of zstd's jobs, partly compressible.
        let mut x: u64 = 88172645463325252;
        let data: Vec<u8> = (0..40 << 20)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 3 == 0 {
                    (x >> 56) as u8
                } else {
                    (i / 4096) as u8
                }
            })
            .collect();
        let one = zstd_with(1, &data);
        assert_eq!(one, zstd_with(2, &data));
        assert_eq!(one, zstd_with(5, &data));
    }

    #[test]
    fn round_trip_and_deterministic() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for c in [Compression::Zstd, Compression::Gzip] {
            let mut e1 = c.encoder(Vec::new()).unwrap();
            e1.write_all(&data).unwrap();
            let a = e1.finish().unwrap();
            let mut e2 = c.encoder(Vec::new()).unwrap();
            for chunk in data.chunks(777) {
                e2.write_all(chunk).unwrap();
            }
            let b = e2.finish().unwrap();
            assert_eq!(a, b, "{c:?} output depends on write sizes");
            let mut out = Vec::new();
            decompressing_reader(std::io::BufReader::new(&a[..]))
                .unwrap()
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, data);
        }
    }
}
