//! The `egress` network of agents: outbound connections, and nothing of the host.
//!
//! The container's own network namespace gets a veth pair to the host and an address in
//! [`SUBNET`] from CNI's `ptp` and `host-local` plugins (containernetworking-plugins; they also
//! turn on IPv4 forwarding). A table of arena's own in nftables masquerades what leaves
//! [`SUBNET`] (not the plugin's `ipMasq`, which needs `iptables`: a node may have none, as the
//! some GPU machines have none, and the offline kit ships `nft`), and drops, for every packet
//! from [`SUBNET`]:
//! - anything addressed to the host itself (the input hook, and before it the prerouting hook
//!   ahead of any destination NAT of the host's: every host address and port —
//!   the runner, containerd, whatever listens; the host's loopback is not routable from the
//!   namespace at all; IPv6, which these rules do not match, is off on the host's end of the
//!   veth pair, and rules for that interface drop whatever it brings in and any IPv6 it
//!   would send on),
//! - anything addressed to another agent or to a link-local address (cloud metadata services),
//! - with an allowlist, anything not addressed to an allowed destination (names resolved when
//!   the container is created) or to the host's DNS servers.
//!
//! Each step is a maintained tool run as a process (the plugins, `nft`); their errors are
//! reported with what ran.

use std::io::Write;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Result, RuntimeError};

mod owner;

/// The addresses agents get.
pub const SUBNET: &str = "10.89.0.0/16";
/// The CNI network's name (host-local keeps its leases under DATA_DIR/NAME).
pub const NETWORK: &str = "arena-egress";
/// Where host-local records which address each container holds.
pub const DATA_DIR: &str = "/run/arena/cni";
/// Where the CNI plugins are looked for.
pub const PLUGIN_DIRS: &[&str] = &["/usr/lib/cni", "/opt/cni/bin"];
const TABLE: &str = "arena_egress";

fn fail(what: &str, detail: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::invalid(format!("egress network: {what}"), detail.to_string())
}

/// Where an offline install's CNI plugins are (its etc/arena.env sets it): looked in first.
pub const PLUGIN_DIR_VAR: &str = "ARENA_CNI_PATH";

fn plugin_dir() -> Result<PathBuf> {
    std::env::var_os(PLUGIN_DIR_VAR)
        .map(PathBuf::from)
        .into_iter()
        .chain(PLUGIN_DIRS.iter().map(PathBuf::from))
        .find(|d| d.join("ptp").is_file() && d.join("host-local").is_file())
        .ok_or_else(|| {
            fail(
                "CNI plugins",
                format!(
                    "`ptp` and `host-local` not found in ${PLUGIN_DIR_VAR} or {} (Debian: \
                     containernetworking-plugins; an offline install sets ${PLUGIN_DIR_VAR})",
                    PLUGIN_DIRS.join(", ")
                ),
            )
        })
}

fn cni_config() -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": NETWORK,
        "type": "ptp",
        // Masquerading is the table's (module docs): the plugin's would run `iptables`.
        "ipMasq": false,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": SUBNET}]],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": DATA_DIR,
        },
    })
    .to_string()
}

/// Runs `cmd` with `stdin`, returning its stdout or an error naming it and its stderr.
fn run(mut cmd: Command, stdin: &str, what: &str) -> Result<String> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(what, e))?;
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin.as_bytes()).map_err(|e| fail(what, e))?;
    }
    let out = child.wait_with_output().map_err(|e| fail(what, e))?;
    if !out.status.success() {
        return Err(fail(
            what,
            format!(
                "{}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cni(command: &str, id: &str, netns: Option<&Path>) -> Result<String> {
    let dir = plugin_dir()?;
    let mut cmd = Command::new(dir.join("ptp"));
    cmd.env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", id)
        .env(
            "CNI_NETNS",
            netns.map(|p| p.display().to_string()).unwrap_or_default(),
        )
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", &dir);
    run(cmd, &cni_config(), &format!("CNI {command} for {id}"))
}

fn nft(script: &str, what: &str) -> Result<String> {
    let mut cmd = Command::new("nft");
    cmd.arg("-f").arg("-");
    run(cmd, script, what)
}

/// The chains a table of an older arena may lack, by name, in nftables' syntax:
/// - `postrouting` masquerades agents' traffic out of the host;
/// - `prerouting` drops what agents send to any of the host's own addresses before any
///   destination NAT of the host's can send it on (a port the host forwards, as Docker's
///   published ports are, would otherwise pass the input hook by and reach whatever it
///   forwards to).
fn later_chains() -> [(&'static str, String); 2] {
    [
        (
            "postrouting",
            format!(
                "  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr {SUBNET} ip daddr != {SUBNET} masquerade comment \"agents leave as the host\"
  }}
"
            ),
        ),
        (
            "prerouting",
            format!(
                "  chain prerouting {{
    type filter hook prerouting priority dstnat - 10; policy accept;
    ip saddr {SUBNET} fib daddr type local counter drop comment \"nor what the host forwards\"
  }}
"
            ),
        ),
    ]
}

/// arena's whole table, as [`ensure_table`] creates it.
fn table_script() -> String {
    format!(
        "table inet {TABLE} {{
  chain input {{
    type filter hook input priority filter - 5; policy accept;
    ip saddr {SUBNET} counter drop comment \"agents reach nothing of the host\"
  }}
  chain forward {{
    type filter hook forward priority filter - 5; policy accept;
    ip saddr {SUBNET} ip daddr {SUBNET} counter drop comment \"nor one another\"
    ip saddr {SUBNET} ip daddr {{ 127.0.0.0/8, 169.254.0.0/16 }} counter drop comment \"nor link-local services\"
  }}
{}}}
",
        later_chains().map(|(_, c)| c).concat()
    )
}

/// arena's table: created once per boot (kept while agents run; a second runner finds it).
/// A table an older arena made gets the chains it lacks added.
fn ensure_table() -> Result<()> {
    let listed = |what: &[&str]| {
        let mut list = Command::new("nft");
        list.args(what);
        run(list, "", "nft list").is_ok()
    };
    if !listed(&["list", "table", "inet", TABLE]) {
        return nft(&table_script(), "creating the nftables table").map(|_| ());
    }
    for (name, chain) in later_chains() {
        if !listed(&["list", "chain", "inet", TABLE, name]) {
            nft(
                &format!("table inet {TABLE} {{\n{chain}}}\n"),
                &format!("adding the {name} chain"),
            )?;
        }
    }
    Ok(())
}

/// The chain holding one container's allowlist.
fn chain_of(id: &str) -> String {
    let h = sha2_hex(id);
    format!("allow_{}", &h[..16])
}

fn sha2_hex(s: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// The host's DNS servers, as agents should use them: `resolv.conf`'s non-loopback servers
/// (systemd-resolved's upstream list where the host's own points at 127.0.0.53).
pub fn nameservers() -> Vec<IpAddr> {
    let read = |p: &str| -> Vec<IpAddr> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().strip_prefix("nameserver"))
            .filter_map(|a| a.trim().parse().ok())
            .filter(|a: &IpAddr| !a.is_loopback())
            .collect()
    };
    let found = read("/etc/resolv.conf");
    if found.is_empty() {
        read("/run/systemd/resolve/resolv.conf")
    } else {
        found
    }
}

/// The resolv.conf an egress container gets (None: the host has no server it could reach).
pub fn resolv_conf() -> Option<String> {
    let ns = nameservers();
    (!ns.is_empty()).then(|| {
        ns.iter()
            .map(|a| format!("nameserver {a}\n"))
            .collect::<String>()
    })
}

/// Writes [`resolv_conf`] to `DATA_DIR/resolv.conf` (when it changed) and returns its path.
pub fn resolv_conf_file() -> Result<Option<PathBuf>> {
    let Some(text) = resolv_conf() else {
        return Ok(None);
    };
    let p = Path::new(DATA_DIR).join("resolv.conf");
    if std::fs::read_to_string(&p).ok().as_deref() != Some(text.as_str()) {
        std::fs::create_dir_all(DATA_DIR).map_err(|e| RuntimeError::io(DATA_DIR, e))?;
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, &text).map_err(|e| RuntimeError::io(&tmp, e))?;
        std::fs::rename(&tmp, &p).map_err(|e| RuntimeError::io(&p, e))?;
    }
    Ok(Some(p))
}

/// Every address `allow` names: IPv4 addresses and CIDR blocks as they are, names resolved
/// now (agents have IPv4 only).
pub fn resolve_allowlist(allow: &[String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for a in allow {
        let (bare, prefix) = match a.split_once('/') {
            Some((b, p)) => (b, Some(p)),
            None => (a.as_str(), None),
        };
        if let Ok(ip) = bare.parse::<IpAddr>() {
            if !ip.is_ipv4() {
                return Err(fail("allowlist", format!("{a}: agents have IPv4 only")));
            }
            if let Some(p) = prefix {
                if !p.parse::<u8>().is_ok_and(|n| n <= 32) {
                    return Err(fail("allowlist", format!("{a}: the prefix is 0 to 32")));
                }
            }
            out.push(a.clone());
            continue;
        }
        let addrs = (a.as_str(), 443)
            .to_socket_addrs()
            .map_err(|e| fail("allowlist", format!("{a}: {e}")))?;
        let v4: Vec<String> = addrs
            .filter(|s| s.is_ipv4())
            .map(|s| s.ip().to_string())
            .collect();
        if v4.is_empty() {
            return Err(fail("allowlist", format!("{a}: no IPv4 address")));
        }
        out.extend(v4);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The host's end of the veth pair, from the `ptp` plugin's result.
fn host_interface(result: &str) -> Result<String> {
    let v: serde_json::Value =
        serde_json::from_str(result).map_err(|e| fail("CNI result", format!("{e}: {result}")))?;
    v["interfaces"]
        .as_array()
        .and_then(|i| i.iter().find(|x| x.get("sandbox").is_none()))
        .and_then(|x| x["name"].as_str())
        .map(str::to_string)
        .ok_or_else(|| fail("CNI result", format!("no host interface in {result}")))
}

/// Turns IPv6 off on the host's end of an agent's veth pair. The table's rules match IPv4
/// (agents get IPv4 addresses only), but the kernel gives both ends an IPv6 link-local
/// address: an agent could reach any host service listening on `[::]` at the address its
/// gateway's MAC gives (EUI-64), with no capability at all. With IPv6 off on that interface
/// the host drops every IPv6 packet arriving there. A host without IPv6 has nothing to turn off.
fn no_ipv6(host_if: &str) -> Result<()> {
    let knob = PathBuf::from(format!("/proc/sys/net/ipv6/conf/{host_if}/disable_ipv6"));
    if !Path::new("/proc/sys/net/ipv6").exists() {
        return Ok(());
    }
    std::fs::write(&knob, "1")
        .map_err(|e| fail("turning IPv6 off", format!("{}: {e}", knob.display())))
}

/// The rules of `id`'s allowlist: its chain (the host's DNS servers, then `allowed`, then a
/// drop) and the jump to it for packets from `host_if`.
fn allowlist_rules(id: &str, host_if: &str, allowed: &[String]) -> String {
    let dns: Vec<String> = nameservers()
        .iter()
        .filter(|a| a.is_ipv4())
        .map(|a| a.to_string())
        .collect();
    let chain = chain_of(id);
    let mut script = format!("add chain inet {TABLE} {chain}\n");
    if !dns.is_empty() {
        script += &format!(
            "add rule inet {TABLE} {chain} ip daddr {{ {} }} meta l4proto {{ tcp, udp }} th dport 53 return\n",
            dns.join(", ")
        );
    }
    script += &format!(
        "add rule inet {TABLE} {chain} ip daddr {{ {} }} return\n\
         add rule inet {TABLE} {chain} counter drop\n\
         add rule inet {TABLE} forward iifname \"{host_if}\" jump {chain} comment \"arena:{id}\"\n",
        allowed.join(", ")
    );
    script
}

/// Connects the container whose first process is `pid` (created, not started) to the egress
/// network; with `allow`, only to those destinations (and the host's DNS servers).
pub fn attach(id: &str, pid: u32, allow: &[String]) -> Result<()> {
    let allowed = resolve_allowlist(allow)?;
    ensure_table()?;
    let netns = PathBuf::from(format!("/proc/{pid}/ns/net"));
    // The record before the address: a clean-up that lists the address finds its holder.
    owner::record(Path::new(DATA_DIR), id, pid)?;
    let result = cni("ADD", id, Some(&netns)).inspect_err(|_| {
        owner::forget(Path::new(DATA_DIR), id);
    })?;
    let done = (|| {
        let host_if = host_interface(&result)?;
        no_ipv6(&host_if)?;
        // And by interface, whatever the packet's family or source: nothing from the agent's
        // end is the host's to take in, and no IPv6 of it goes on, should IPv6 come back on
        // that interface (a host-wide `disable_ipv6=0` by the host's own tools would). One
        // nft transaction with the allowlist: all of the container's rules, or none.
        let mut script = format!(
            "add rule inet {TABLE} input iifname \"{host_if}\" counter drop comment \"arena:{id}\"\n\
             add rule inet {TABLE} forward iifname \"{host_if}\" meta nfproto ipv6 counter drop comment \"arena:{id}\"\n"
        );
        if !allow.is_empty() {
            script += &allowlist_rules(id, &host_if, &allowed);
        }
        nft(&script, &format!("the rules of {id}")).map(|_| ())
    })();
    if let Err(e) = done {
        let _ = detach(id);
        return Err(e);
    }
    Ok(())
}

/// Disconnects container `id`: its interface and allowlist rules, its address and the host's
/// end of its veth pair (the namespace may be gone already). Nothing attached is not an error.
pub fn detach(id: &str) -> Result<()> {
    let chain = chain_of(id);
    let tag = format!("comment \"arena:{id}\"");
    for hook in ["input", "forward"] {
        let mut list = Command::new("nft");
        list.args(["-a", "list", "chain", "inet", TABLE, hook]);
        let Ok(rules) = run(list, "", "nft list") else {
            continue;
        };
        for l in rules.lines().filter(|l| l.contains(&tag)) {
            if let Some(h) = l.rsplit("# handle ").next() {
                let _ = nft(
                    &format!("delete rule inet {TABLE} {hook} handle {}\n", h.trim()),
                    "nft delete rule",
                );
            }
        }
    }
    let _ = nft(
        &format!("flush chain inet {TABLE} {chain}\ndelete chain inet {TABLE} {chain}\n"),
        "nft delete chain",
    );
    if attached().iter().any(|a| a == id) {
        cni("DEL", id, None)?;
    }
    owner::forget(Path::new(DATA_DIR), id);
    Ok(())
}

/// The attachments no process holds any more: of [`attached`], those whose container's first
/// process (recorded by [`attach`]) is gone, or that have no record (made before records
/// were kept). Another runner's agent (another containerd, or another namespace of this one)
/// is alive, and keeps its address and its allowlist: before, any runner's clean-up detached
/// every attachment its own containerd did not list, leaving that agent on the network with
/// no allowlist.
pub fn orphaned() -> Vec<String> {
    attached()
        .into_iter()
        .filter(|id| !owner::alive(Path::new(DATA_DIR), id))
        .collect()
}

/// The containers holding an address on the egress network (host-local's lease files hold
/// the container id on their first line).
pub fn attached() -> Vec<String> {
    let dir = Path::new(DATA_DIR).join(NETWORK);
    let mut ids: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<IpAddr>().is_ok())
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|t| t.lines().next().map(|l| l.trim().to_string()))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlists_keep_addresses_and_refuse_what_agents_cannot_reach() {
        let got = resolve_allowlist(&[
            "10.1.2.3".into(),
            "192.0.2.0/24".into(),
            "10.1.2.3".into(),
            // /etc/hosts: no query leaves the machine.
            "localhost".into(),
        ])
        .unwrap();
        assert_eq!(got, ["10.1.2.3", "127.0.0.1", "192.0.2.0/24"]);
        for (bad, why) in [("::1", "IPv4 only"), ("10.0.0.0/40", "prefix")] {
            let e = resolve_allowlist(&[bad.into()]).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn the_cni_config_is_the_egress_network() {
        let v: serde_json::Value = serde_json::from_str(&cni_config()).unwrap();
        assert_eq!(v["type"], "ptp");
        // No `iptables`: the table masquerades, once, for the whole subnet.
        assert_eq!(v["ipMasq"], false);
        let table = table_script();
        assert_eq!(table.matches("masquerade").count(), 1, "{table}");
        assert!(table.contains(&format!(
            "ip saddr {SUBNET} ip daddr != {SUBNET} masquerade"
        )));
        assert!(table.contains(&format!("ip saddr {SUBNET} fib daddr type local")));
        assert_eq!(v["ipam"]["ranges"][0][0]["subnet"], SUBNET);
        assert_eq!(chain_of("a").len(), "allow_".len() + 16);
        assert_ne!(chain_of("a"), chain_of("b"));
    }
}
