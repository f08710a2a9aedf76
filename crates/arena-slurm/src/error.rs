use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("{command}: {message}")]
    Command { command: String, message: String },
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Run(#[from] arena_run::RunError),
}

impl SlurmError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> SlurmError {
        SlurmError::Io {
            path: path.into(),
            error: source,
        }
    }
}

pub type Result<T, E = SlurmError> = std::result::Result<T, E>;
