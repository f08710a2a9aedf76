//! A real registry for tests (Debian's `docker-registry`, distribution 2.8) on 127.0.0.1 with
//! its storage in a temporary directory, optionally behind htpasswd basic auth; and a
//! loopback TCP relay that cuts its connections after a byte budget (a registry that goes
//! away mid-pull). Stopped when dropped. `bash ci/setup.sh` installs the registry.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct LocalRegistry {
    child: Child,
    pub dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    pub host: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl LocalRegistry {
    /// Starts a registry; with `htpasswd` (`user:bcrypt-hash` lines), every request needs
    /// basic auth.
    pub fn start(htpasswd: Option<&str>) -> LocalRegistry {
        // A free port can be taken by someone else between our probe and the registry's bind
        // (tests run in parallel): then the registry exits, and another port is tried.
        for _ in 0..5 {
            if let Some(r) = LocalRegistry::try_start(htpasswd) {
                return r;
            }
        }
        panic!("docker-registry did not stay up on five free ports");
    }

    fn try_start(htpasswd: Option<&str>) -> Option<LocalRegistry> {
        let dir = tempfile::tempdir().expect("tempdir");
        let host = format!("127.0.0.1:{}", free_port());
        let auth = match htpasswd {
            Some(lines) => {
                let f = dir.path().join("htpasswd");
                std::fs::write(&f, lines).expect("htpasswd");
                format!(
                    "auth:\n  htpasswd:\n    realm: arena-test\n    path: {}\n",
                    f.display()
                )
            }
            None => String::new(),
        };
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\n{auth}",
                dir.path().join("data").display()
            ),
        )
        .expect("config");
        let log = dir.path().join("registry.log");
        let mut child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(std::fs::File::create(dir.path().join("registry.err")).expect("log"))
            .spawn()
            .expect("docker-registry (bash ci/setup.sh installs it)");
        let t0 = Instant::now();
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return None;
            }
            if TcpStream::connect(&host).is_ok() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "docker-registry did not listen on {host}: {}",
                std::fs::read_to_string(dir.path().join("registry.err")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Listening, and still ours: the port was not someone else's.
        std::thread::sleep(Duration::from_millis(100));
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        Some(LocalRegistry { child, dir, host })
    }

    /// The file a blob's bytes are kept in (the filesystem driver's layout), to corrupt it.
    pub fn blob_file(&self, hex: &str) -> PathBuf {
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Relays loopback connections to `upstream`, closing each one after `budget` bytes have
/// gone back to the client.
pub struct CuttingRelay {
    pub host: String,
    stop: Arc<AtomicBool>,
}

impl CuttingRelay {
    pub fn start(upstream: &str, budget: u64) -> CuttingRelay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let host = listener.local_addr().expect("addr").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let (up, flag) = (upstream.to_string(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = conn else { continue };
                let Ok(server) = TcpStream::connect(&up) else {
                    continue;
                };
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c_in, &mut s_out);
                });
                std::thread::spawn(move || {
                    let (mut s_in, mut c_out) = (server, client);
                    let mut sent = 0u64;
                    let mut buf = [0u8; 16 * 1024];
                    loop {
                        let n = match s_in.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        let allowed = (budget - sent).min(n as u64) as usize;
                        if c_out.write_all(&buf[..allowed]).is_err() {
                            break;
                        }
                        sent += allowed as u64;
                        if sent >= budget {
                            break;
                        }
                    }
                    let _ = c_out.shutdown(Shutdown::Both);
                    let _ = s_in.shutdown(Shutdown::Both);
                });
            }
        });
        CuttingRelay { host, stop }
    }
}

impl Drop for CuttingRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(&self.host);
    }
}
