//! arena-digest: content addresses. Every digest arena prints, records or checks is a
//! [`Digest`]: `sha256:<64 lowercase hex>`, parsed and validated when read, displayed one way,
//! and recomputable from the bytes it names. Writers and readers hash what passes through.

use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// A string that is not a `sha256:<64 lowercase hex>` digest, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}`: {reason}")]
pub struct DigestError {
    pub value: String,
    pub reason: &'static str,
}

/// A `sha256:<hex>` digest. Only sha256 is produced or accepted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

impl Digest {
    pub fn from_sha256(bytes: [u8; 32]) -> Digest {
        Digest(format!("sha256:{}", hex::encode(bytes)))
    }

    pub fn of_bytes(data: &[u8]) -> Digest {
        Digest::from_sha256(Sha256::digest(data).into())
    }

    /// The digest of a file's bytes, and its size.
    pub fn of_file(path: &Path) -> std::io::Result<(Digest, u64)> {
        let mut f = std::fs::File::open(path)?;
        let mut w = HashingWriter::new(std::io::sink());
        std::io::copy(&mut f, &mut w)?;
        Ok(w.finish())
    }

    pub fn parse(s: &str) -> Result<Digest, DigestError> {
        let bad = |reason| DigestError {
            value: s.to_string(),
            reason,
        };
        let hex = s
            .strip_prefix("sha256:")
            .ok_or_else(|| bad("a digest must start with `sha256:`"))?;
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(bad("a sha256 digest has 64 lowercase hex digits"));
        }
        Ok(Digest(s.to_string()))
    }

    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, for display.
    pub fn short(&self) -> &str {
        &self.hex()[..12]
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Digest {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        Digest::parse(&s).map_err(|e| e.to_string())
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.0
    }
}

/// Forwards writes and hashes (and counts) every byte that passes.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    pub fn finish(self) -> (Digest, u64) {
        (
            Digest::from_sha256(self.hasher.finalize().into()),
            self.count,
        )
    }

    pub fn into_parts(self) -> (W, Digest, u64) {
        (
            self.inner,
            Digest::from_sha256(self.hasher.finalize().into()),
            self.count,
        )
    }

    pub fn count(&self) -> u64 {
        self.count
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Hashes (and counts) every byte read through it.
pub struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    pub fn finish(self) -> (Digest, u64) {
        (
            Digest::from_sha256(self.hasher.finalize().into()),
            self.count,
        )
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_checks_what_it_reads() {
        let d = Digest::of_bytes(b"x");
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, format!("\"{d}\""));
        assert_eq!(serde_json::from_str::<Digest>(&json).unwrap(), d);
        let e = serde_json::from_str::<Digest>("\"md5:00\"").unwrap_err();
        assert!(e.to_string().contains("must start with `sha256:`"), "{e}");
    }

    #[test]
    fn known_vectors_and_parsing() {
        assert_eq!(
            Digest::of_bytes(b"").as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let mut w = HashingWriter::new(Vec::new());
        w.write_all(b"abc").unwrap();
        let (buf, d, n) = w.into_parts();
        assert_eq!(buf, b"abc");
        assert_eq!(n, 3);
        assert_eq!(d, Digest::of_bytes(b"abc"));
        assert!(Digest::parse(d.as_str()).is_ok());
        assert!(Digest::parse("sha512:00").is_err());
        assert!(Digest::parse("sha256:ABC").is_err());
        assert!(Digest::parse(&format!("sha256:{}", "A".repeat(64))).is_err());
    }
}
