use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file the runner was given is wrong; `field` names what.
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
    #[error("{task}: {source}")]
    Runtime {
        task: String,
        #[source]
        source: arena_runtime::RuntimeError,
    },
    #[error(transparent)]
    Image(#[from] arena_image::ImageError),
    #[error(transparent)]
    Task(#[from] arena_task::TaskError),
    #[error(transparent)]
    TaskConfig(#[from] arena_task::TaskErrors),
    #[error(transparent)]
    Eval(#[from] arena_eval::EvalError),
    #[error("run cancelled")]
    Cancelled,
    #[error("{0}")]
    Other(String),
}

impl RunnerError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> RunnerError {
        RunnerError::Io {
            path: path.into(),
            source,
        }
    }

    pub fn invalid(file: impl std::fmt::Display, field: &str, message: impl Into<String>) -> Self {
        RunnerError::Invalid {
            file: file.to_string(),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = RunnerError> = std::result::Result<T, E>;
