//! The registry client arena uses: oci-client over rustls (ring), plain HTTP only for hosts
//! named insecure and for loopback (as Docker does), mirrors by registry host, and
//! credentials from a docker-style file.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::{Client, Reference};

use crate::auth::{normalize_host, Credentials};
use crate::error::{RegistryError, Result, Target};

#[derive(Debug, Clone, Default)]
pub struct RegistryConfig {
    /// Registries (`host[:port]`) spoken to over plain HTTP. Loopback hosts always are.
    pub insecure: Vec<String>,
    /// Registry host → mirror host (`docker.io` → `mirror.lab:5000`): pulls by digest go to
    /// the mirror; what it returns is verified against the same digests, so a mirror can
    /// withhold content but never change it.
    pub mirrors: BTreeMap<String, String>,
    /// A docker-style credentials file (default: `$DOCKER_CONFIG/config.json`, else
    /// `~/.docker/config.json`, where present).
    pub auth_file: Option<PathBuf>,
    /// The platform an index is resolved to (default linux/amd64).
    pub os: Option<String>,
    pub architecture: Option<String>,
}

pub struct Registry {
    pub(crate) config: RegistryConfig,
    pub(crate) credentials: Credentials,
}

/// A parsed reference, after mirroring, with the client that speaks to its registry.
pub(crate) struct Endpoint {
    pub reference: Reference,
    pub client: Client,
    /// The registry as the user named it (before any mirror), for pinned names.
    pub origin: String,
}

fn is_loopback(host: &str) -> bool {
    let name = host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl Registry {
    pub fn new(config: RegistryConfig) -> Result<Registry> {
        // reqwest's rustls carries no crypto provider of its own here: ring, process-wide.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let credentials = Credentials::load(config.auth_file.as_deref())?;
        Ok(Registry {
            config,
            credentials,
        })
    }

    pub fn platform(&self) -> (String, String) {
        (
            self.config.os.clone().unwrap_or_else(|| "linux".into()),
            self.config
                .architecture
                .clone()
                .unwrap_or_else(|| "amd64".into()),
        )
    }

    /// Parses `reference`, applies a mirror, and makes a client for its registry.
    pub(crate) fn endpoint(&self, reference: &str) -> Result<Endpoint> {
        let mut r: Reference =
            reference
                .parse()
                .map_err(|e: oci_client::ParseError| RegistryError::Reference {
                    reference: reference.to_string(),
                    message: e.to_string(),
                })?;
        let origin = r.registry().to_string();
        if let Some(m) = self
            .config
            .mirrors
            .iter()
            .find(|(k, _)| normalize_host(k) == normalize_host(&origin))
            .map(|(_, v)| v.clone())
        {
            r.set_mirror_registry(m);
        }
        let host = r.resolve_registry().to_string();
        let plain = is_loopback(&host)
            || self
                .config
                .insecure
                .iter()
                .any(|h| normalize_host(h) == normalize_host(&host));
        let protocol = if plain {
            ClientProtocol::HttpsExcept(vec![host.clone()])
        } else {
            ClientProtocol::Https
        };
        let client = Client::new(ClientConfig {
            protocol,
            // Indexes are resolved by arena itself (pull.rs), to the configured platform.
            platform_resolver: None,
            // One PUT per blob, streamed from the store: chunked PATCHes cost a round trip
            // each (measured: ci/bench/registry-transfer.sh).
            use_monolithic_push: true,
            connect_timeout: Some(Duration::from_secs(15)),
            read_timeout: Some(Duration::from_secs(120)),
            ..Default::default()
        });
        Ok(Endpoint {
            reference: r,
            client,
            origin,
        })
    }

    pub(crate) fn target(&self, e: &Endpoint, what: String) -> Target {
        Target {
            registry: e.reference.resolve_registry().to_string(),
            repository: e.reference.repository().to_string(),
            what,
            credentials: self.credentials.describe(e.reference.resolve_registry()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_plain_http_and_others_are_not() {
        for h in [
            "127.0.0.1:5000",
            "localhost:5000",
            "[::1]:5000",
            "127.1.2.3",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in ["registry.example:5000", "10.0.0.1:5000", "docker.io"] {
            assert!(!is_loopback(h), "{h}");
        }
    }

    #[test]
    fn mirrors_replace_the_registry_but_keep_the_origin() {
        let reg = Registry::new(RegistryConfig {
            mirrors: [("docker.io".to_string(), "127.0.0.1:5999".to_string())].into(),
            auth_file: Some(PathBuf::from("/nonexistent/ignored")),
            ..Default::default()
        });
        // An explicit credentials file must exist.
        assert!(reg.is_err());
        let reg = Registry {
            config: RegistryConfig {
                mirrors: [("docker.io".to_string(), "127.0.0.1:5999".to_string())].into(),
                ..Default::default()
            },
            credentials: Credentials::anonymous(),
        };
        let e = reg.endpoint("rocm/pytorch:latest").unwrap();
        assert_eq!(e.reference.resolve_registry(), "127.0.0.1:5999");
        assert_eq!(e.origin, "docker.io");
        assert!(matches!(
            reg.endpoint("not a reference"),
            Err(RegistryError::Reference { .. })
        ));
    }
}
