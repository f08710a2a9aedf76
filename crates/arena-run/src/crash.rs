//! Crash points, for the crash tests. Where the environment variable
//! [`CRASH_AT`] names a point, the process kills itself with SIGKILL there: no destructor,
//! no flush, no cleanup runs, as when a client is killed or its machine is lost. A test can
//! so end a run at exactly the moment it means (a result's temporary file written but not
//! yet renamed; a container running), which killing from outside can only hit by chance, and
//! then check what the same command makes of what was left.
//!
//! The variable is read once. Unset (any run but those tests), a point compares nothing.

use std::sync::{Arc, OnceLock};

use tokio::sync::Notify;

/// The variable that names the point to crash at.
pub const CRASH_AT: &str = "ARENA_CRASH_AT";

fn armed() -> Option<&'static str> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    AT.get_or_init(|| std::env::var(CRASH_AT).ok().filter(|s| !s.is_empty()))
        .as_deref()
}

/// Kills this process with SIGKILL where `<kind>:<what>` is the armed point (compared
/// without building the name: atomic writes pass here).
pub fn point(kind: &str, what: &str) {
    if let Some(at) = armed() {
        if at.split_once(':') == Some((kind, what)) {
            die(at);
        }
    }
}

/// Where `during:<what>` is the armed point: the notifier to give the container that `what`
/// names (arena-runtime's `RunRequest::on_started`); this process is killed the moment that
/// container's process has started, whatever else it is doing then. None where not armed.
pub fn during(what: &str) -> Option<Arc<Notify>> {
    let at = armed()?;
    if at.strip_prefix("during:") != Some(what) {
        return None;
    }
    let started = Arc::new(Notify::new());
    let waiting = started.clone();
    let name = at.to_string();
    std::thread::spawn(move || {
        // A runtime of its own: the process's may be busy, and this thread only waits.
        let rt = tokio::runtime::Builder::new_current_thread().build();
        if let Ok(rt) = rt {
            rt.block_on(waiting.notified());
        }
        die(&name);
    });
    Some(started)
}

fn die(name: &str) -> ! {
    eprintln!("{CRASH_AT}={name}: killing this process (SIGKILL)");
    let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGKILL);
    // SIGKILL cannot be caught; the process is gone before this line.
    std::process::abort()
}

#[cfg(test)]
mod tests {
    /// A point that is not armed does nothing (the whole test process would die otherwise);
    /// the armed ones are exercised by arenactl's crash_points.rs, in processes of their own.
    #[test]
    fn an_unarmed_point_does_nothing() {
        assert!(std::env::var(super::CRASH_AT).is_err());
        super::point("write", "result.json");
        super::during("agent");
    }
}
