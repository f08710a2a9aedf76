//! Errors of a service that could not be reached (a runner, containerd), told with the
//! operating system's own reason and what to do about it. gRPC's "transport error" alone
//! names neither.

use std::path::Path;
use std::time::Duration;

use crate::cli::DEFAULT_RUNNER;

/// The reason the OS gives for not reaching `addr` (`unix:PATH` or `http://HOST:PORT`), found
/// by connecting once more without gRPC; None where it can be reached now.
fn os_reason(addr: &str) -> Option<std::io::Error> {
    if let Some(p) = addr.strip_prefix("unix:") {
        return std::os::unix::net::UnixStream::connect(p.trim_start_matches("//")).err();
    }
    let host_port = addr
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/');
    let addrs = match std::net::ToSocketAddrs::to_socket_addrs(host_port) {
        Ok(a) => a.collect::<Vec<_>>(),
        Err(e) => return Some(e),
    };
    let mut last = None;
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, Duration::from_secs(3)) {
            Ok(_) => return None,
            Err(e) => last = Some(e),
        }
    }
    last
}

/// What to do when the runner at `addr` is not there.
fn runner_hint(addr: &str, why: &std::io::Error) -> String {
    match why.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "the socket is the runner's user's and its group's (mode 660): join that group, \
             or start the runner with --socket-group GROUP ({addr})"
        ),
        _ if addr.starts_with("unix:") => format!(
            "is `arenactl runner serve` running? It listens on {DEFAULT_RUNNER} by default; \
             name another with --runner (or `runner` in ~/.config/arena/config.toml), or \
             leave --runner out to run a runner in-process"
        ),
        _ => "is `arenactl runner serve --listen HOST:PORT --token-file FILE` running on that \
              host, and its port open to this one?"
            .to_string(),
    }
}

/// `e` (from connecting to the runner at `addr`) with the OS's reason and a hint, where it is
/// a failure to connect; other errors as they are.
pub fn runner_error(addr: &str, e: arena_client::ClientError) -> anyhow::Error {
    if !matches!(e, arena_client::ClientError::Connect { .. }) {
        return e.into();
    }
    // Reachable after all (a missing token, a TLS or protocol failure): no hint to start it.
    let Some(why) = os_reason(addr) else {
        return e.into();
    };
    let mut msg = e.to_string();
    let os = why.to_string();
    if !msg.contains(&os) {
        msg = format!("{msg}: {os}");
    }
    anyhow::anyhow!("{msg}\nhint: {}", runner_hint(addr, &why))
}

/// `e` (from connecting to containerd at `socket`) with a hint, where it is a failure to
/// connect; other errors as they are.
pub fn containerd_error(socket: &Path, e: arena_runtime::RuntimeError) -> anyhow::Error {
    if !matches!(e, arena_runtime::RuntimeError::Connect { .. }) {
        return e.into();
    }
    let Some(why) = std::os::unix::net::UnixStream::connect(socket).err() else {
        return e.into();
    };
    let mut msg = e.to_string();
    let os = why.to_string();
    if !msg.contains(&os) {
        msg = format!("{msg}: {os}");
    }
    let hint = match why.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "{} is root's: run arenactl as root (containerd's socket is not shared)",
            socket.display()
        ),
        _ => format!(
            "is containerd running? Start it (`containerd &` as root, or ci/containerd.sh in \
             a checkout of arena), or name its socket with --containerd (now {})",
            socket.display()
        ),
    };
    anyhow::anyhow!("{msg}\nhint: {hint}")
}
