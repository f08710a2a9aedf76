use std::path::PathBuf;

use arena_run::RunError;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Reading, checking or recording the run (files, digests, requests).
    #[error(transparent)]
    Run(#[from] RunError),
    /// The container engine failed a task run: an infrastructure error, not a result.
    #[error("{task}: {error}")]
    Runtime {
        task: String,
        error: arena_runtime::RuntimeError,
    },
    /// The evaluator refused the task's derived harness (the construct of the runner it cannot
    /// follow): the task run goes on with the task's own commands (TaskRun::refused).
    #[error("arena's evaluator cannot follow the task's runner: {0}")]
    NotDerivable(String),
    /// The untouched task fails its own gates on this machine: there is nothing to score an
    /// agent against, so the task run ends without a result (and without running the agent).
    #[error(
        "{task}: the untouched task fails its own gates here ({reason}): nothing to score against"
    )]
    BaselineFailed { task: String, reason: String },
    #[error("run cancelled")]
    Cancelled,
    /// The caller may not do this (another identity's run).
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    Other(String),
}

impl RunnerError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> RunnerError {
        RunError::io(path, source).into()
    }

    pub fn invalid(file: impl std::fmt::Display, field: &str, message: impl Into<String>) -> Self {
        RunError::invalid(file, field, message).into()
    }

    pub fn drift(task: &str, what: String, expected: String, found: String) -> Self {
        RunError::Drift {
            task: task.to_string(),
            what,
            expected,
            found,
        }
        .into()
    }
}

impl From<arena_image::ImageError> for RunnerError {
    fn from(e: arena_image::ImageError) -> Self {
        RunError::from(e).into()
    }
}

impl From<arena_task::TaskError> for RunnerError {
    fn from(e: arena_task::TaskError) -> Self {
        RunError::from(e).into()
    }
}

impl From<arena_task::TaskErrors> for RunnerError {
    fn from(e: arena_task::TaskErrors) -> Self {
        RunError::from(e).into()
    }
}

impl From<arena_eval::EvalError> for RunnerError {
    fn from(e: arena_eval::EvalError) -> Self {
        RunError::from(e).into()
    }
}

pub type Result<T, E = RunnerError> = std::result::Result<T, E>;
