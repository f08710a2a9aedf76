//! What went wrong with a registry, named so the user knows what to fix: the reference, the
//! registry, where credentials were read from, both digests of a mismatch.

use std::path::PathBuf;

use oci_client::errors::OciDistributionError;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("`{reference}`: not an image reference ({message})")]
    Reference { reference: String, message: String },

    #[error("registry {registry} is unreachable: {message}")]
    Unreachable { registry: String, message: String },

    #[error("{registry}/{repository}: access denied ({message}); credentials: {credentials}")]
    Unauthorized {
        registry: String,
        repository: String,
        message: String,
        credentials: String,
    },

    #[error("{what}: not found in the registry ({message})")]
    NotFound { what: String, message: String },

    #[error("{what}: digest mismatch: expected {expected}, found {found}")]
    DigestMismatch {
        what: String,
        expected: String,
        found: String,
    },

    #[error("{what}: size mismatch: expected {expected} bytes, found {found}")]
    SizeMismatch {
        what: String,
        expected: u64,
        found: u64,
    },

    #[error("{what}: {message}")]
    Protocol { what: String, message: String },

    #[error("{}: {message}", path.display())]
    AuthFile { path: PathBuf, message: String },

    #[error(transparent)]
    Store(#[from] arena_image::ImageError),
}

pub type Result<T, E = RegistryError> = std::result::Result<T, E>;

/// Where a failing request was going, for [`classify`].
pub struct Target {
    pub registry: String,
    pub repository: String,
    /// What was asked for (`host/repo:tag`, `blob sha256:…`).
    pub what: String,
    /// Where credentials came from (never the secret itself).
    pub credentials: String,
}

/// An error's whole chain on one line (reqwest puts the cause, e.g. "connection refused",
/// below a generic "error sending request").
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

/// Maps the client's error to one that says what to do: unreachable, denied, not found, or a
/// protocol fault with the registry's own message.
pub fn classify(e: OciDistributionError, t: &Target) -> RegistryError {
    let denied = |message: String| RegistryError::Unauthorized {
        registry: t.registry.clone(),
        repository: t.repository.clone(),
        message,
        credentials: t.credentials.clone(),
    };
    let not_found = |message: String| RegistryError::NotFound {
        what: t.what.clone(),
        message,
    };
    match e {
        OciDistributionError::AuthenticationFailure(m) => denied(m),
        OciDistributionError::UnauthorizedError { url } => denied(format!("401 from {url}")),
        OciDistributionError::ImageManifestNotFoundError(m) => not_found(m),
        OciDistributionError::ServerError { code, url, message } => match code {
            401 | 403 => denied(format!("{code} from {url}: {message}")),
            404 => not_found(format!("404 from {url}: {message}")),
            _ => RegistryError::Protocol {
                what: t.what.clone(),
                message: format!("HTTP {code} from {url}: {message}"),
            },
        },
        OciDistributionError::RegistryError { envelope, url } => {
            use oci_client::errors::OciErrorCode as C;
            let message = format!("{url}: {envelope}");
            let codes: Vec<&C> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes
                .iter()
                .any(|c| matches!(c, C::Unauthorized | C::Denied))
            {
                denied(message)
            } else if codes.iter().any(|c| {
                matches!(
                    c,
                    C::ManifestUnknown | C::BlobUnknown | C::NameUnknown | C::NotFound
                )
            }) {
                not_found(message)
            } else {
                RegistryError::Protocol {
                    what: t.what.clone(),
                    message,
                }
            }
        }
        OciDistributionError::RequestError(r) if r.status().is_some() => {
            let code = r.status().map(|c| c.as_u16()).unwrap_or(0);
            match code {
                401 | 403 => denied(chain(&r)),
                404 => not_found(chain(&r)),
                _ => RegistryError::Protocol {
                    what: t.what.clone(),
                    message: chain(&r),
                },
            }
        }
        OciDistributionError::RequestError(r) if r.is_connect() || r.is_timeout() => {
            RegistryError::Unreachable {
                registry: t.registry.clone(),
                message: chain(&r),
            }
        }
        other => RegistryError::Protocol {
            what: t.what.clone(),
            message: chain(&other),
        },
    }
}
