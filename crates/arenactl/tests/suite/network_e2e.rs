//! Agents' networks end to end: an agent in each network mode tries a test host that this
//! test runs in a network namespace of its own (reachable only with `egress`), services on the
//! host's loopback and on the host's addresses, the runner's and containerd's sockets (never
//! reachable). Traffic goes only to loopback and to the test's own namespace. Needs root,
//! containerd, runc, iproute2, nftables and containernetworking-plugins (not iptables).

use crate::common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::daemon::*;
use common::test_host::TestNet;
use serde_json::Value;

const PREFIX_SUM: &str = "python2python/arena/prefix_sum";

/// The test's own network namespace (common::test_host), where a TCP server answers on
/// port 8088.
struct TestHost {
    _net: TestNet,
    subnet: u32,
    server: Child,
}

impl TestHost {
    fn start() -> TestHost {
        let net = TestNet::start(0);
        let n = net.subnet;
        let server = Command::new("ip")
            .args(["netns", "exec", &net.ns, "python3", "-c"])
            .arg(format!(
                "import socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
                 s.bind(('10.199.{n}.2', 8088))\ns.listen()\nwhile True:\n    c, peer = s.accept()\n    \
                 c.sendall(('seen from ' + peer[0]).encode())\n    c.close()\n"
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        TestHost {
            _net: net,
            subnet: n,
            server,
        }
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        // The namespace goes with `_net`, after the server.
    }
}

const DNAT_TABLE: &str = "arena_test_dnat";

/// A table of the test's own in the host's nftables, deleted when dropped.
struct HostDnat;

impl HostDnat {
    fn add(script: &str) -> HostDnat {
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", DNAT_TABLE])
            .stderr(Stdio::null())
            .status();
        let mut nft = Command::new("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        nft.stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(nft.wait().unwrap().success(), "nft: {script}");
        HostDnat
    }
}

impl Drop for HostDnat {
    fn drop(&mut self) {
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", DNAT_TABLE])
            .status();
    }
}

/// Where an agent that waits for its release ([`agent`]) looks for it: a file the test writes
/// into the task run's workspace (the agent's /workspace) on the host.
const RELEASE: &str = ".release";

/// An agent that tries every target and writes what happened to /workspace/net.json.
/// `wait`: it first waits (60 s at most) for the test to write [`RELEASE`] into its workspace
/// ([`release`]), so that the test acts while the agent runs and before it probes.
fn agent(
    dir: &Path,
    name: &str,
    network: &str,
    allow: &[String],
    targets: &Value,
    wait: bool,
) -> String {
    let script = format!(
        r#"import json, os, socket, time
release = "/workspace/{RELEASE}"
deadline = time.time() + (60 if {wait} else 0)
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.1)
released = os.path.exists(release)
targets = json.loads({targets:?})
gw = None
for line in open("/proc/net/route").read().splitlines()[1:]:
    f = line.split()
    if f[1] == "00000000":
        gw = socket.inet_ntoa(bytes.fromhex(f[2])[::-1])
out = {{}}
for name, t in targets.items():
    try:
        if "unix" in t:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(3)
            s.connect(t["unix"])
        elif t.get("host") == "gateway-link-local":
            # The host's end of the veth pair over IPv6: its link-local address from the MAC
            # the gateway's ARP entry shows (EUI-64), no capability needed.
            mac = None
            for line in open("/proc/net/arp").read().splitlines()[1:]:
                f = line.split()
                if f[0] == gw:
                    mac = f[3]
            if mac is None:
                raise OSError("no ARP entry for the gateway")
            b = bytes.fromhex(mac.replace(":", ""))
            eui = bytes([b[0] ^ 2]) + b[1:3] + bytes([0xFF, 0xFE]) + b[3:]
            addr = "fe80::" + ":".join(eui[i:i + 2].hex() for i in range(0, 8, 2))
            s = socket.create_connection((addr + "%eth0", t["port"]), timeout=3)
        else:
            host = gw if t["host"] == "gateway" else t["host"]
            if host is None:
                raise OSError("no route to the host")
            s = socket.create_connection((host, t["port"]), timeout=3)
        out[name] = "open"
        if name == "test_host":
            out["test_host_saw"] = s.recv(100).decode()
        s.close()
    except Exception as e:
        out[name] = type(e).__name__ + ": " + str(e)
out["released"] = released
json.dump(out, open("/workspace/net.json", "w"))
"#,
        targets = targets.to_string(),
        wait = if wait { "True" } else { "False" },
    );
    let allow = if allow.is_empty() {
        String::new()
    } else {
        format!("allow_hosts = {allow:?}\n")
    };
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\nimage = \"task\"\ncommand = [\"python3\", \"-c\", {script:?}]\n\
             network = \"{network}\"\n{allow}timeout_s = 120\n"
        ),
    )
    .unwrap();
    file.display().to_string()
}

/// The task run's directory in the run directory `out` (its one task, its first repeat).
fn task_run(out: &Path) -> PathBuf {
    out.join("tasks")
        .join(PREFIX_SUM.replace('/', "__"))
        .join("r0")
}

/// Lets a waiting agent ([`agent`]) of the run in `out` go on to probe.
fn release(out: &Path) {
    std::fs::write(task_run(out).join("workspace").join(RELEASE), b"").unwrap();
}

fn outcome(out: &Path) -> Value {
    let p = task_run(out).join("workspace.kept/net.json");
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

#[test]
fn agents_reach_the_outside_through_egress_and_nothing_of_the_host() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let host = TestHost::start();
    let n = host.subnet;
    // Services on the host: one on its loopback, one on every address.
    let lo = TcpListener::bind("127.0.0.1:0").unwrap();
    let any = TcpListener::bind("0.0.0.0:0").unwrap();
    // A port the host forwards (destination NAT, as Docker's published ports are) from its
    // address on the test host's link to the test host's server: the host's business, never
    // an agent's way around the rules about the host.
    let forwarded = TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _dnat = HostDnat::add(&format!(
        "table ip {DNAT_TABLE} {{\n  chain pre {{\n    type nat hook prerouting priority dstnat; policy accept;\n    \
         ip daddr 10.199.{n}.1 tcp dport {forwarded} dnat to 10.199.{n}.2:8088\n  }}\n}}\n"
    ));
    let any6 = TcpListener::bind("[::]:0").unwrap();
    let any6_port = any6.local_addr().unwrap().port();
    let (lo_port, any_port) = (
        lo.local_addr().unwrap().port(),
        any.local_addr().unwrap().port(),
    );
    let targets = serde_json::json!({
        "test_host": {"host": format!("10.199.{n}.2"), "port": 8088},
        "host_loopback": {"host": "127.0.0.1", "port": lo_port},
        "host_gateway": {"host": "gateway", "port": any_port},
        "host_address": {"host": format!("10.199.{n}.1"), "port": any_port},
        "host_ipv6": {"host": "gateway-link-local", "port": any6_port},
        "host_forwarded": {"host": format!("10.199.{n}.1"), "port": forwarded},
        "containerd_socket": {"unix": d.socket.clone()},
        "default_containerd_socket": {"unix": "/run/containerd/containerd.sock"},
        "runner_socket": {"unix": "/run/arena/runner.sock"},
    });
    let never = [
        "host_loopback",
        "host_gateway",
        "host_address",
        "host_ipv6",
        "host_forwarded",
        "containerd_socket",
        "default_containerd_socket",
        "runner_socket",
    ];

    let runs = [
        ("egress", vec![], true),
        ("none", vec![], false),
        // An allowlist that names another address: the test host is refused too.
        ("egress", vec![format!("10.199.{n}.3")], false),
    ];
    for (i, (network, allow, reaches)) in runs.into_iter().enumerate() {
        let name = format!("net-{network}-{i}");
        let file = agent(tmp, &name, network, &allow, &targets, false);
        let out = tmp.join(&name);
        d.run_on(&file, &[PREFIX_SUM], &out, &[]);
        let got = outcome(&out);
        eprintln!("{name}: {got}");
        assert_eq!(
            got["test_host"] == "open",
            reaches,
            "{name}: the test host: {got}"
        );
        for t in never {
            assert_ne!(got[t], "open", "{name}: {t} was reachable: {got}");
        }
        if reaches {
            // Masqueraded by arena's nftables table (the CNI plugin's own needs iptables):
            // the test host sees the host's address, not the agent's.
            assert_eq!(
                got["test_host_saw"],
                format!("seen from 10.199.{n}.1"),
                "{name}: {got}"
            );
        }
    }

    // Another runner's clean-up (here `arenactl gc` of another containerd namespace, whose
    // containers do not include this agent's) while an agent with an allowlist is running: the
    // agent keeps its allowlist. Before, that clean-up detached every attachment it did not
    // list itself, and the agent then reached the test host.
    let name = "net-egress-held";
    let file = agent(
        tmp,
        name,
        "egress",
        &[format!("10.199.{n}.3")],
        &targets,
        true,
    );
    let out = tmp.join(name);
    let got = std::thread::scope(|s| {
        let run = s.spawn(|| d.run_on(&file, &[PREFIX_SUM], &out, &[]));
        let owners = Path::new("/run/arena/cni/owners");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        while !std::fs::read_dir(owners).is_ok_and(|mut e| e.next().is_some()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the agent never attached"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let o = arenactl()
            .args([
                "gc",
                "--containerd",
                &d.socket,
                "--namespace",
                "arena-other",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        // And IPv6 turned on again on the host's end of its veth pair, as a host-wide
        // `disable_ipv6=0` by the host's own tools would: the agent still reaches nothing of
        // the host over it (arena's rules for its interface).
        let host_if = loop {
            let o = Command::new("nft")
                .args(["list", "chain", "inet", "arena_egress", "input"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let found = text
                .lines()
                .filter(|l| l.contains("comment \"arena:"))
                .find_map(|l| l.split("iifname \"").nth(1)?.split('"').next())
                .map(str::to_string);
            if let Some(i) = found {
                break i;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no interface rule: {text}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{host_if}/disable_ipv6"),
            "0",
        )
        .unwrap();
        release(&out);
        run.join().unwrap();
        outcome(&out)
    });
    eprintln!("{name}: {got}");
    assert_eq!(
        got["released"], true,
        "{name}: the agent probed before the clean-up and IPv6 were done: {got}"
    );
    assert_ne!(
        got["test_host"], "open",
        "{name}: another runner's clean-up lifted the allowlist: {got}"
    );
    assert_ne!(
        got["host_ipv6"], "open",
        "{name}: IPv6 on again reached the host: {got}"
    );

    assert!(empty(&d.leftovers()));
    // Nothing of the egress network is left: addresses, allowlist rules.
    let leases = std::fs::read_dir("/run/arena/cni/arena-egress")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("10."))
        .count();
    assert_eq!(leases, 0, "egress addresses left held");
    let rules = Command::new("nft")
        .args(["list", "chain", "inet", "arena_egress", "forward"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&rules.stdout).contains("arena:"));
    drop((lo, any, any6));
}
