//! A runner serving the Evaluate API for a test (`arenactl runner serve` on a socket in the
//! test's directory), and the runtime its client calls run on.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::daemon::{arenactl, store, Daemon};

/// A runner serving the Evaluate API on a socket in the test's directory; stopped with
/// SIGINT (as Ctrl-C stops it) when dropped.
pub struct Served {
    pub child: Child,
    pub addr: String,
}

impl Served {
    pub fn start(d: &Daemon, extra: &[&str]) -> Served {
        let sock = d.dir.path().join("runner.sock");
        let child = arenactl()
            .args(["runner", "serve", "--gpus", "cpu:1", "--listen"])
            .arg(format!("unix:{}", sock.display()))
            .args(["--containerd", &d.socket, "--store"])
            .arg(store())
            .arg("--eval-dir")
            .arg(d.dir.path().join("eval"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the runner did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Served {
            child,
            addr: format!("unix:{}", sock.display()),
        }
    }

    /// Stops the runner as Ctrl-C does and waits for it.
    pub fn stop(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let t0 = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the runner did not stop"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}
