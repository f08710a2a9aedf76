//! Errors of the task model. Every variant names the file (and, where there is one, the field)
//! so that a user can go straight to the line to fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error(transparent)]
    BadId(#[from] crate::id::BadTaskId),

    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error("{}: YAML syntax error: {message}", file.display())]
    Syntax { file: PathBuf, message: String },

    /// A field is missing, has the wrong type or an invalid value.
    #[error("{}: {field}: {message}", file.display())]
    Field {
        file: PathBuf,
        field: String,
        message: String,
    },

    #[error("{}: no config.yaml here or in any directory below (not a task directory)", dir.display())]
    NoTasks { dir: PathBuf },

    #[error("{}: not a task directory (no config.yaml)", dir.display())]
    NotATask { dir: PathBuf },

    #[error("task `{id}` not found under {}", root.display())]
    UnknownTask { id: String, root: PathBuf },

    #[error(
        "task id `{id}` names two tasks: {} and {} (ids are relative to each directory given; give a common parent instead)",
        first.display(),
        second.display()
    )]
    DuplicateId {
        id: String,
        first: PathBuf,
        second: PathBuf,
    },
}

impl TaskError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TaskError::Io {
            path: path.into(),
            error: source,
        }
    }

    pub(crate) fn field(
        file: impl Into<PathBuf>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        TaskError::Field {
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A task that failed to load carries every problem found, not just the first one.
#[derive(Debug)]
pub struct TaskErrors(pub Vec<TaskError>);

impl std::fmt::Display for TaskErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for TaskErrors {}

impl From<TaskError> for TaskErrors {
    fn from(e: TaskError) -> Self {
        TaskErrors(vec![e])
    }
}
