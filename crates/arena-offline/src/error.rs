//! What can go wrong making or installing a kit; each error names the file it is about.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An input that cannot go into a kit, or a kit that is not well formed.
    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
    /// A file whose bytes are not those the manifest (or the user) pins.
    #[error("{what}: expected {expected}, found {found}")]
    Mismatch {
        what: String,
        expected: String,
        found: String,
    },
    #[error(transparent)]
    Image(#[from] arena_image::ImageError),
    #[error(transparent)]
    Run(#[from] arena_run::RunError),
    #[error(transparent)]
    Task(#[from] arena_task::TaskError),
}

pub type Result<T> = std::result::Result<T, OfflineError>;

impl OfflineError {
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> OfflineError {
        OfflineError::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    pub fn invalid(what: impl std::fmt::Display, message: impl Into<String>) -> OfflineError {
        OfflineError::Invalid {
            what: what.to_string(),
            message: message.into(),
        }
    }
}
