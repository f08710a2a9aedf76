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

    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{0}")]
    Image(#[from] arena_image::ImageError),

    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
}

impl RuntimeError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RuntimeError::Io {
            path: path.into(),
            source,
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
