//! Who is calling. The runner serves only callers it can name, and names them before any RPC
//! runs: over its unix socket the kernel says who the peer is (SO_PEERCRED: `uid:N`); over TCP
//! a caller presents a bearer token from the runner's token file (`token:NAME`). Runs belong
//! to the identity that submitted them (policy.rs decides who may act on them).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tonic::service::Interceptor;
use tonic::transport::server::UdsConnectInfo;
use tonic::{Request, Status};

use crate::error::{Result, RunnerError};

/// The shortest token accepted: 32 characters (e.g. `openssl rand -hex 32` gives 64).
pub const MIN_TOKEN_LEN: usize = 32;

/// The named caller of an RPC, put in its extensions by [`Authenticator`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub String);

/// The identity of a process on this machine.
pub fn uid_identity(uid: u32) -> String {
    format!("uid:{uid}")
}

/// A runner's bearer tokens, by the sha256 of the token (the tokens themselves are not kept,
/// and lookups do not compare secrets byte by byte).
#[derive(Debug, Default)]
pub struct Tokens {
    by_hash: BTreeMap<[u8; 32], String>,
}

impl Tokens {
    /// Reads a token file: one `NAME TOKEN` per line, `#` comments. The file must be readable
    /// by its owner only (a token others can read names no one).
    pub fn load(path: &Path) -> Result<Tokens> {
        let meta = std::fs::metadata(path).map_err(|e| RunnerError::io(path, e))?;
        if meta.mode() & 0o077 != 0 {
            return Err(RunnerError::invalid(
                path.display(),
                "mode",
                format!(
                    "{:o}: others can read or change it; chmod 600 it",
                    meta.mode() & 0o777
                ),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| RunnerError::io(path, e))?;
        Tokens::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, file: &str) -> Result<Tokens> {
        let mut t = Tokens::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let field = format!("line {}", i + 1);
            let mut parts = line.split_whitespace();
            let (Some(name), Some(token), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(RunnerError::invalid(file, &field, "expected `NAME TOKEN`"));
            };
            if !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c))
            {
                return Err(RunnerError::invalid(
                    file,
                    &field,
                    format!("name `{name}`: letters, digits and . _ - @ only"),
                ));
            }
            if token.len() < MIN_TOKEN_LEN {
                return Err(RunnerError::invalid(
                    file,
                    &field,
                    format!("the token of `{name}` has fewer than {MIN_TOKEN_LEN} characters"),
                ));
            }
            if t.by_hash.values().any(|n| n == name) {
                return Err(RunnerError::invalid(
                    file,
                    &field,
                    format!("`{name}` appears twice"),
                ));
            }
            if t.by_hash.insert(hash(token), name.to_string()).is_some() {
                return Err(RunnerError::invalid(
                    file,
                    &field,
                    "this token is another name's too",
                ));
            }
        }
        if t.by_hash.is_empty() {
            return Err(RunnerError::invalid(file, "tokens", "the file holds none"));
        }
        Ok(t)
    }

    fn name_of(&self, token: &str) -> Option<&str> {
        self.by_hash.get(&hash(token)).map(String::as_str)
    }
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Names each caller, or refuses it (`Unauthenticated`) before its RPC runs.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    tokens: Option<Arc<Tokens>>,
}

impl Authenticator {
    pub fn new(tokens: Option<Tokens>) -> Self {
        Authenticator {
            tokens: tokens.map(Arc::new),
        }
    }

    pub fn identify<T>(&self, req: &Request<T>) -> Result<String, Status> {
        // The unix socket: the kernel's word on the peer (the socket's mode decided who may
        // connect at all).
        if let Some(info) = req.extensions().get::<UdsConnectInfo>() {
            return match info.peer_cred {
                Some(cred) => Ok(uid_identity(cred.uid())),
                None => Err(Status::unauthenticated(
                    "the peer's credentials could not be read from the socket",
                )),
            };
        }
        let Some(tokens) = &self.tokens else {
            return Err(Status::unauthenticated(
                "this runner accepts no tokens: connect through its unix socket",
            ));
        };
        let Some(header) = req.metadata().get("authorization") else {
            return Err(Status::unauthenticated(
                "no bearer token: this runner requires one (arenactl --token-file FILE)",
            ));
        };
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .ok_or_else(|| {
                Status::unauthenticated("the authorization header is not `Bearer TOKEN`")
            })?;
        match tokens.name_of(token.trim()) {
            Some(name) => Ok(format!("token:{name}")),
            None => Err(Status::unauthenticated(
                "the bearer token is not one this runner knows",
            )),
        }
    }
}

impl Interceptor for Authenticator {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        let who = self.identify(&req)?;
        req.extensions_mut().insert(Caller(who));
        Ok(req)
    }
}

/// The caller an RPC was authenticated as (refused if the interceptor did not run: a service
/// served without one serves no one).
pub fn caller<T>(req: &Request<T>) -> Result<String, Status> {
    req.extensions()
        .get::<Caller>()
        .map(|c| c.0.clone())
        .ok_or_else(|| Status::unauthenticated("the caller was not authenticated"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "alice-token-0123456789abcdef0123456789";
    const B: &str = "bob-token-0123456789abcdef0123456789abc";

    fn tokens() -> Tokens {
        Tokens::parse(&format!("# lab tokens\nalice {A}\n\nbob {B}\n"), "tokens").unwrap()
    }

    fn req(auth: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(a) = auth {
            r.metadata_mut().insert("authorization", a.parse().unwrap());
        }
        r
    }

    #[test]
    fn tokens_name_their_holders_and_nothing_else_passes() {
        let a = Authenticator::new(Some(tokens()));
        assert_eq!(
            a.identify(&req(Some(&format!("Bearer {A}")))).unwrap(),
            "token:alice"
        );
        assert_eq!(
            a.identify(&req(Some(&format!("Bearer {B}")))).unwrap(),
            "token:bob"
        );
        for (bad, why) in [
            (None, "no bearer token"),
            (Some("Bearer nope-nope-nope-nope-nope-nope-nope"), "not one"),
            (Some(A), "not `Bearer TOKEN`"),
        ] {
            let e = a.identify(&req(bad)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated);
            assert!(e.message().contains(why), "{e:?}");
        }
        // Without a token file, TCP callers are refused whatever they send.
        let e = Authenticator::new(None)
            .identify(&req(Some(&format!("Bearer {A}"))))
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
    }

    #[test]
    fn the_interceptor_puts_the_caller_in_the_request() {
        let mut a = Authenticator::new(Some(tokens()));
        let r = a.call(req(Some(&format!("Bearer {A}")))).unwrap();
        assert_eq!(caller(&r).unwrap(), "token:alice");
        assert_eq!(
            caller(&Request::new(())).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
    }

    #[test]
    fn bad_token_files_are_refused_with_the_line() {
        for (text, why) in [
            ("alice short\n", "fewer than 32"),
            (&format!("alice {A} extra\n"), "line 1: expected"),
            (&format!("al ice {A}\n"), "expected"),
            (&format!("al/ice {A}\n"), "letters, digits"),
            (&format!("alice {A}\nalice {B}\n"), "appears twice"),
            (&format!("alice {A}\nbob {A}\n"), "another name's"),
            ("# nothing\n", "holds none"),
        ] {
            let e = Tokens::parse(text, "tokens").unwrap_err().to_string();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_token_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("tokens");
        std::fs::write(&f, format!("alice {A}\n")).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Tokens::load(&f).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        Tokens::load(&f).unwrap();
    }
}
