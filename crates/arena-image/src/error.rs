//! Errors of the image store. Each names what to fix: the recipe file and field, the archive
//! and entry, the blob and both digests.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error("{}: {field}: {message}", file.display())]
    Recipe {
        file: PathBuf,
        field: String,
        message: String,
    },

    /// Content whose digest is not the one it was pinned or named by.
    #[error("{what}: digest mismatch: expected {expected}, found {found}")]
    DigestMismatch {
        what: String,
        expected: String,
        found: String,
    },

    #[error("{what}: size mismatch: expected {expected} bytes, found {found}")]
    SizeMismatch {
        what: String,
        expected: u64,
        found: u64,
    },

    /// An archive entry that would land outside the root, or that we refuse to unpack.
    #[error("{}: entry `{entry}`: {reason}", archive.display())]
    UnsafeEntry {
        archive: PathBuf,
        entry: String,
        reason: String,
    },

    #[error("{}: {message}", path.display())]
    Archive { path: PathBuf, message: String },

    #[error("{what}: {message}")]
    Invalid { what: String, message: String },

    #[error("{}: not found: {what}", path.display())]
    Missing { path: PathBuf, what: String },

    /// A TOML or JSON file that does not parse, or parses into the wrong shape.
    #[error("{}: line {line}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },

    #[error(transparent)]
    Task(#[from] arena_task::TaskError),

    #[error(transparent)]
    Digest(#[from] arena_digest::DigestError),
}

impl ImageError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ImageError::Io {
            path: path.into(),
            error: source,
        }
    }

    pub fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        ImageError::Invalid {
            what: what.into(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = ImageError> = std::result::Result<T, E>;
