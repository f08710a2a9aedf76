use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: no KernelBench problems (no .py file under a `level<N>` directory)")]
    Empty(PathBuf),
    #[error("{0}: exists and is not empty; import into a new directory")]
    OutNotEmpty(PathBuf),
    #[error("{first} and {second} both become task `{id}`")]
    DuplicateId {
        id: String,
        first: String,
        second: String,
    },
}

impl ImportError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ImportError {
        let path = path.into();
        move |source| ImportError::Io { path, source }
    }
}
