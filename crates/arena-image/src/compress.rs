//! Deterministic compression of layer tars: fixed settings, no timestamps or names in headers.

use std::io::Write;

use serde::{Deserialize, Serialize};

pub const MEDIA_TYPE_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
pub const MEDIA_TYPE_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const MEDIA_TYPE_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// zstd level 3 (zstd's default), no checksum, no content size: the frame depends only on the
/// bytes and the zstd library version, which Cargo.lock pins.
const ZSTD_LEVEL: i32 = 3;
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
                e.include_checksum(false)?;
                e.include_contentsize(false)?;
                Encoder::Zstd(e)
            }
            Compression::Gzip => Encoder::Gzip(
                flate2::GzBuilder::new()
                    .mtime(0)
                    .operating_system(255)
                    .write(w, flate2::Compression::new(GZIP_LEVEL)),
            ),
        })
    }
}

pub enum Encoder<W: Write> {
    Zstd(zstd::stream::write::Encoder<'static, W>),
    Gzip(flate2::write::GzEncoder<W>),
}

impl<W: Write> Encoder<W> {
    pub fn finish(self) -> std::io::Result<W> {
        match self {
            Encoder::Zstd(e) => e.finish(),
            Encoder::Gzip(e) => e.finish(),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Encoder::Zstd(e) => e.write(buf),
            Encoder::Gzip(e) => e.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Encoder::Zstd(e) => e.flush(),
            Encoder::Gzip(e) => e.flush(),
        }
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
