//! A host in a network namespace of the test's own: a veth pair from the host (10.199.N.1) to
//! the namespace (10.199.N.2), with a default route back. Agents reach it only through their
//! egress network; traffic goes only to it and to loopback. Removed when dropped.

use std::process::Command;

pub struct TestNet {
    pub ns: String,
    /// N of 10.199.N.0/24.
    pub subnet: u32,
}

pub fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

impl TestNet {
    /// `salt` keeps two tests of one process apart.
    pub fn start(salt: u32) -> TestNet {
        let n = (std::process::id() + salt) % 200 + 20;
        let ns = format!("arena-t{n}");
        let (h, c) = (format!("arth{n}"), format!("artc{n}"));
        // A namespace a killed run of this test left (there is mostly none).
        let _ = Command::new("ip")
            .args(["netns", "del", &ns])
            .stderr(std::process::Stdio::null())
            .status();
        ip(&["netns", "add", &ns]);
        ip(&["link", "add", &h, "type", "veth", "peer", "name", &c]);
        ip(&["link", "set", &c, "netns", &ns]);
        ip(&["addr", "add", &format!("10.199.{n}.1/24"), "dev", &h]);
        ip(&["link", "set", &h, "up"]);
        let inside = |args: &[&str]| {
            let mut a = vec!["netns", "exec", ns.as_str(), "ip"];
            a.extend(args);
            ip(&a);
        };
        inside(&["addr", "add", &format!("10.199.{n}.2/24"), "dev", &c]);
        inside(&["link", "set", &c, "up"]);
        inside(&["link", "set", "lo", "up"]);
        inside(&["route", "add", "default", "via", &format!("10.199.{n}.1")]);
        TestNet { ns, subnet: n }
    }

    /// The namespace's address.
    pub fn addr(&self) -> String {
        format!("10.199.{}.2", self.subnet)
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        // The veth pair goes with the namespace.
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}
