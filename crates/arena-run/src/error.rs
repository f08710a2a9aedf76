use std::path::PathBuf;

/// What can go wrong in reading, planning or recording a run (no container involved).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A file or request field is wrong; `field` names what.
    #[error("{file}: {field}: {message}")]
    Invalid {
        file: String,
        field: String,
        message: String,
    },
    /// A locked digest differs from what was found.
    #[error("{task}: {what} differs from the lockfile: expected {expected}, found {found}")]
    Drift {
        task: String,
        what: String,
        expected: String,
        found: String,
    },
    #[error(transparent)]
    Image(#[from] arena_image::ImageError),
    #[error(transparent)]
    Task(#[from] arena_task::TaskError),
    #[error(transparent)]
    TaskConfig(#[from] arena_task::TaskErrors),
    #[error(transparent)]
    Eval(#[from] arena_eval::EvalError),
    #[error("{0}")]
    Other(String),
}

impl RunError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> RunError {
        RunError::Io {
            path: path.into(),
            error: source,
        }
    }

    pub fn invalid(file: impl std::fmt::Display, field: &str, message: impl Into<String>) -> Self {
        RunError::Invalid {
            file: file.to_string(),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = RunError> = std::result::Result<T, E>;
