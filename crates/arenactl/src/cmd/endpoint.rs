//! Where a runner listens and how a client reaches it. By default a runner listens on a unix
//! socket only its owner and group may open (the kernel names each caller); a TCP listener
//! needs a token file (each caller presents a bearer token), and the runner refuses to start
//! without one. `arenactl run` without `--runner` serves its in-process runner on a socket in
//! a private directory of its own.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use arena_runner::{Authenticator, Engine, RunnerService, Tokens};

use crate::cli::Listen;

pub use arena_client::Client;

/// A client of the runner at `addr`: `unix:PATH`, or `http://HOST:PORT` with the token in
/// `token_file` (arena-client's); a runner that is not there is named with the OS's reason
/// and how to start one.
pub async fn client(addr: &str, token_file: Option<&Path>) -> anyhow::Result<Client> {
    arena_client::connect(addr, token_file)
        .await
        .map_err(|e| super::reach::runner_error(addr, e))
}

/// Binds a unix socket at `path`, readable and writable by its owner and `group` only (a
/// stale socket is replaced; anything else there is refused).
pub fn bind_unix(path: &Path, group: Option<u32>) -> anyhow::Result<tokio::net::UnixListener> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            bail!("{}: exists and is not a socket", path.display());
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!("{}: a runner already listens there", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let listener = tokio::net::UnixListener::bind(path)
        .with_context(|| format!("binding {}", path.display()))?;
    if let Some(g) = group {
        std::os::unix::fs::chown(path, None, Some(g))
            .with_context(|| format!("giving {} to group {g}", path.display()))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .with_context(|| format!("chmod 660 {}", path.display()))?;
    Ok(listener)
}

/// Serves `engine` on `listen` until `shutdown` resolves.
pub async fn serve(
    engine: Arc<Engine>,
    listen: &Listen,
    tokens: Option<Tokens>,
    group: Option<u32>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let svc = RunnerService::new(engine);
    match listen {
        Listen::Unix(path) => {
            let listener = bind_unix(path, group)?;
            let auth = Authenticator::new(tokens);
            tonic::transport::Server::builder()
                .add_service(svc.into_server(auth))
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::UnixListenerStream::new(listener),
                    shutdown,
                )
                .await?;
            let _ = std::fs::remove_file(path);
        }
        Listen::Tcp(addr) => {
            let Some(tokens) = tokens else {
                bail!(
                    "--listen {addr}: a TCP listener needs --token-file FILE (one `NAME TOKEN` \
                     per line, mode 600); without one, listen on a unix socket"
                );
            };
            tonic::transport::Server::builder()
                .add_service(svc.into_server(Authenticator::new(Some(tokens))))
                .serve_with_shutdown(*addr, shutdown)
                .await?;
        }
    }
    Ok(())
}

/// The in-process runner of `arenactl run`: served on a socket in a new directory only this
/// user may enter, for as long as the returned guard lives.
pub async fn in_process(
    engine: Arc<Engine>,
) -> anyhow::Result<(Client, tokio::task::JoinHandle<()>, tempfile::TempDir)> {
    let dir = tempfile::Builder::new().prefix("arena-runner-").tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    let path = dir.path().join("runner.sock");
    let listener = bind_unix(&path, None)?;
    let svc = RunnerService::new(engine).into_server(Authenticator::new(None));
    let server = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
            .await;
    });
    let c = client(&format!("unix:{}", path.display()), None).await?;
    Ok((c, server, dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_path_holding_something_else_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("file");
        std::fs::write(&f, "x").unwrap();
        let e = bind_unix(&f, None).unwrap_err().to_string();
        assert!(e.contains("not a socket"), "{e}");
    }
}
