use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot connect to containerd at {}: {message}", socket.display())]
    Connect { socket: PathBuf, message: String },

    /// A containerd call failed: which call, on what, and containerd's status.
    #[error("containerd {call} ({what}): {status}")]
    Containerd {
        call: &'static str,
        what: String,
        status: Box<tonic::Status>,
    },

    #[error("image {name}: containerd holds manifest {found}, the lockfile says {expected}")]
    ImageMismatch {
        name: String,
        expected: String,
        found: String,
    },

    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error(transparent)]
    Image(#[from] arena_image::ImageError),

    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
}

impl RuntimeError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RuntimeError::Io {
            path: path.into(),
            error: source,
        }
    }

    pub fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        RuntimeError::Invalid {
            what: what.into(),
            message: message.into(),
        }
    }

    /// Whether containerd answered "not found".
    pub fn is_not_found(&self) -> bool {
        matches!(self, RuntimeError::Containerd { status, .. } if status.code() == tonic::Code::NotFound)
    }
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// Maps a tonic status into an error naming the call and its object.
pub(crate) fn call<T>(
    r: std::result::Result<tonic::Response<T>, tonic::Status>,
    call: &'static str,
    what: impl Into<String>,
) -> Result<T> {
    r.map(|x| x.into_inner())
        .map_err(|status| RuntimeError::Containerd {
            call,
            what: what.into(),
            status: Box::new(status),
        })
}

/// An error and its sources as one line (`transport error: No such file or directory`),
/// skipping a source whose text the line already ends with (some errors print their source;
/// arena's carry their cause's text and do not repeat it as a source). Also how `arenactl`
/// prints an error.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let c = cause.to_string();
        if !line.ends_with(&c) {
            line = format!("{line}: {c}");
        }
        next = cause.source();
    }
    line
}
