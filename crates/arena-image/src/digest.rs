//! Digests are arena-digest's: re-exported where the image store always had them.

pub use arena_digest::{Digest, DigestError, HashingReader, HashingWriter};
