use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// An agent's workspace file the evaluator refuses to take (a symlink, a directory…).
    #[error("{path}: {reason}")]
    Refused { path: String, reason: String },
}

impl EvalError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> EvalError {
        EvalError::Io {
            path: path.into(),
            error: source,
        }
    }
}
