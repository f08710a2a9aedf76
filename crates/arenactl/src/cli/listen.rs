//! `--listen` addresses of `arenactl runner serve`.

use std::path::{Path, PathBuf};

/// Where a runner listens.
#[derive(Debug, Clone, PartialEq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(std::net::SocketAddr),
}

impl std::str::FromStr for Listen {
    type Err = String;

    /// `unix:PATH`, or `HOST:PORT` / `tcp://HOST:PORT`.
    fn from_str(s: &str) -> Result<Listen, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            let p = Path::new(p.trim_start_matches("//"));
            if !p.is_absolute() {
                return Err(format!(
                    "{s}: a socket path is absolute (unix:/run/arena/runner.sock)"
                ));
            }
            return Ok(Listen::Unix(p.to_path_buf()));
        }
        let a = s.strip_prefix("tcp://").unwrap_or(s);
        a.parse()
            .map(Listen::Tcp)
            .map_err(|_| format!("{s}: expected unix:PATH or HOST:PORT"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(
            "unix:/run/arena/runner.sock".parse::<Listen>().unwrap(),
            Listen::Unix("/run/arena/runner.sock".into())
        );
        assert_eq!(
            "unix:///tmp/r.sock".parse::<Listen>().unwrap(),
            Listen::Unix("/tmp/r.sock".into())
        );
        assert_eq!(
            "127.0.0.1:50551".parse::<Listen>().unwrap(),
            Listen::Tcp("127.0.0.1:50551".parse().unwrap())
        );
        assert_eq!(
            "tcp://[::1]:1".parse::<Listen>().unwrap(),
            Listen::Tcp("[::1]:1".parse().unwrap())
        );
        assert!("unix:relative.sock".parse::<Listen>().is_err());
        assert!("localhost".parse::<Listen>().is_err());
    }
}
