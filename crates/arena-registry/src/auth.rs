//! Credentials from a docker-style config file (`{"auths": {"HOST": {"auth": base64(user:pass)}}}`
//! or `username`/`password` fields): the file `--auth-file` names, else
//! `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`. A registry with no entry is
//! accessed anonymously; a token registry's bearer tokens are fetched with these credentials
//! by the client. Credential helpers (`credsStore`, `credHelpers`) are not run: arena reads
//! no secret it cannot show the origin of.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use crate::error::{RegistryError, Result};

#[derive(Debug, Default, Clone)]
pub struct Credentials {
    /// The file they came from (`None`: no file, every registry anonymous).
    file: Option<PathBuf>,
    /// Registry host (normalized) → user and password.
    auths: BTreeMap<String, (String, String)>,
}

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// `https://index.docker.io/v1/` → `index.docker.io`; Docker Hub's names are one registry.
pub fn normalize_host(key: &str) -> String {
    let h = key
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let h = h.split('/').next().unwrap_or(h).to_ascii_lowercase();
    match h.as_str() {
        "docker.io" | "registry-1.docker.io" | "index.docker.io" => "index.docker.io".into(),
        _ => h,
    }
}

impl Credentials {
    /// No credentials: every registry anonymous.
    pub fn anonymous() -> Credentials {
        Credentials::default()
    }

    /// The default file (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), if any.
    pub fn default_file() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("DOCKER_CONFIG") {
            return Some(PathBuf::from(d).join("config.json"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json"))
    }

    /// Reads `explicit` (which must exist), else the default file where there is one.
    pub fn load(explicit: Option<&Path>) -> Result<Credentials> {
        let path = match explicit {
            Some(p) => p.to_path_buf(),
            None => match Credentials::default_file() {
                Some(p) if p.is_file() => p,
                _ => return Ok(Credentials::anonymous()),
            },
        };
        let bad = |message: String| RegistryError::AuthFile {
            path: path.clone(),
            message,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
        let cfg: ConfigFile =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a docker config: {e}")))?;
        let mut auths = BTreeMap::new();
        for (key, entry) in cfg.auths {
            let pair = match (entry.auth, entry.username, entry.password) {
                (Some(a), _, _) if !a.is_empty() => {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(a.trim())
                        .map_err(|e| bad(format!("auths.{key}.auth: not base64 ({e})")))?;
                    let s = String::from_utf8(raw)
                        .map_err(|_| bad(format!("auths.{key}.auth: not UTF-8")))?;
                    let (u, p) = s.split_once(':').ok_or_else(|| {
                        bad(format!(
                            "auths.{key}.auth: expected base64 of USER:PASSWORD"
                        ))
                    })?;
                    (u.to_string(), p.to_string())
                }
                (_, Some(u), Some(p)) => (u, p),
                _ => continue,
            };
            auths.insert(normalize_host(&key), pair);
        }
        Ok(Credentials {
            file: Some(path),
            auths,
        })
    }

    /// The client's authentication for `registry`.
    pub fn for_registry(&self, registry: &str) -> RegistryAuth {
        match self.auths.get(&normalize_host(registry)) {
            Some((u, p)) => RegistryAuth::Basic(u.clone(), p.clone()),
            None => RegistryAuth::Anonymous,
        }
    }

    /// Where `registry`'s credentials come from, for error messages (never the secret).
    pub fn describe(&self, registry: &str) -> String {
        match (&self.file, self.auths.get(&normalize_host(registry))) {
            (Some(f), Some((u, _))) => format!("user `{u}` from {}", f.display()),
            (Some(f), None) => format!("anonymous (no entry for {registry} in {})", f.display()),
            (None, _) => "anonymous (no credentials file; pass --auth-file)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_and_hosts_normalized() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("config.json");
        let b64 = base64::engine::general_purpose::STANDARD.encode("ann:s3cr:et");
        std::fs::write(
            &f,
            format!(
                r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{b64}"}},
                   "127.0.0.1:5000": {{"username": "bo", "password": "pw"}},
                   "helper.example": {{}} }}, "credsStore": "desktop"}}"#
            ),
        )
        .unwrap();
        let c = Credentials::load(Some(&f)).unwrap();
        assert!(matches!(c.for_registry("docker.io"),
            RegistryAuth::Basic(u, p) if u == "ann" && p == "s3cr:et"));
        assert!(matches!(c.for_registry("127.0.0.1:5000"),
            RegistryAuth::Basic(u, _) if u == "bo"));
        assert!(matches!(
            c.for_registry("helper.example"),
            RegistryAuth::Anonymous
        ));
        assert!(c.describe("127.0.0.1:5000").contains("user `bo`"));
        assert!(!c.describe("127.0.0.1:5000").contains("pw"));
    }

    #[test]
    fn bad_files_are_refused_with_the_file_and_field() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("config.json");
        std::fs::write(&f, r#"{"auths": {"r.example": {"auth": "%%%"}}}"#).unwrap();
        let e = Credentials::load(Some(&f)).unwrap_err().to_string();
        assert!(
            e.contains("config.json") && e.contains("auths.r.example.auth"),
            "{e}"
        );
        std::fs::write(&f, "[").unwrap();
        let e = Credentials::load(Some(&f)).unwrap_err().to_string();
        assert!(e.contains("not a docker config"), "{e}");
        let e = Credentials::load(Some(&d.path().join("none.json")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.json"), "{e}");
    }
}
