//! The OCI runtime spec of a container, built with oci-spec: process, mounts (read-write
//! workspace, read-only binds that are really read-only, tmpfs /tmp), device nodes and device
//! cgroup rules of the GPU profile, resource limits, and the network mode.

use std::path::{Path, PathBuf};

use oci_spec::runtime::{
    Capability, LinuxBuilder, LinuxCapabilitiesBuilder, LinuxCpuBuilder, LinuxDeviceBuilder,
    LinuxDeviceCgroupBuilder, LinuxDeviceType, LinuxMemoryBuilder, LinuxNamespaceType,
    LinuxPidsBuilder, LinuxResourcesBuilder, Mount, MountBuilder, ProcessBuilder, RootBuilder,
    Spec, UserBuilder,
};
use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};
use crate::gpu::{BindMount, DeviceGrant};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// An own network namespace: no route anywhere (the evaluator's mode).
    None,
    /// An own network namespace with outbound connections (CNI ptp + masquerade, set up by
    /// the runtime between creating and starting the container; see crate::egress); the host
    /// itself, other agents and link-local services are dropped. `allow`, if not empty, are
    /// the only destinations (names resolved when the container is created, IPv4 addresses,
    /// CIDR blocks).
    Egress { allow: Vec<String> },
    /// The host's network namespace.
    Host,
}

/// Limits that keep a fork bomb or a memory hog from taking the host down.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub memory_bytes: i64,
    pub pids: i64,
    pub cpu_shares: u64,
    /// CPUs the container may use (a CFS quota over a 100 ms period); None: no quota.
    pub cpus: Option<f64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 16 << 30,
            pids: 4096,
            cpu_shares: 1024,
            cpus: None,
        }
    }
}

/// A tmpfs of its own at `destination`: writable space with a size, owned by `uid`:`gid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tmpfs {
    pub destination: String,
    pub bytes: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Everything that goes into one container's spec.
#[derive(Debug, Clone)]
pub struct ContainerConfig {
    pub args: Vec<String>,
    /// `NAME=value`, image environment first (later entries win).
    pub env: Vec<String>,
    pub cwd: String,
    pub uid: u32,
    pub gid: u32,
    pub binds: Vec<BindMount>,
    /// Size of the tmpfs at /tmp.
    pub tmp_bytes: u64,
    pub network: Network,
    pub limits: Limits,
    pub devices: DeviceGrant,
    pub hostname: String,
    /// The image's root file system mounted read-only (writes only to binds and tmpfs).
    pub readonly_rootfs: bool,
    /// Tmpfs mounts besides /tmp.
    pub tmpfs: Vec<Tmpfs>,
    /// Capabilities the process keeps (`CAP_SETUID`…); empty: none at all.
    pub capabilities: Vec<String>,
    pub seccomp: crate::seccomp::Profile,
}

impl ContainerConfig {
    /// A container running `args` as root in `/`, with the usual PATH, no binds, a 64 MiB /tmp,
    /// no network, default limits and no devices; callers change what their container needs.
    pub fn command(args: &[&str]) -> ContainerConfig {
        ContainerConfig {
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()],
            cwd: "/".into(),
            uid: 0,
            gid: 0,
            binds: Vec::new(),
            tmp_bytes: 64 << 20,
            network: Network::None,
            limits: Limits::default(),
            devices: DeviceGrant::default(),
            hostname: "arena".into(),
            readonly_rootfs: false,
            tmpfs: Vec::new(),
            capabilities: Vec::new(),
            seccomp: crate::seccomp::Profile::Agent,
        }
    }
}

fn bad(e: oci_spec::OciSpecError) -> RuntimeError {
    RuntimeError::invalid("runtime spec", e.to_string())
}

/// Refuses a container path that is not absolute or has a `.`, `..` or empty part: mounts
/// are placed where they say, never where a link or a `..` would take them.
pub fn check_destination(d: &str) -> Result<()> {
    let plain = d.starts_with('/')
        && d.len() > 1
        && d[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if plain {
        Ok(())
    } else {
        Err(RuntimeError::invalid(
            format!("mount destination `{d}`"),
            "must be an absolute path of plain names",
        ))
    }
}

fn bind(m: &BindMount) -> Result<Mount> {
    check_destination(&m.destination)?;
    let mut options = vec![
        "rbind".to_string(),
        "nosuid".to_string(),
        "nodev".to_string(),
    ];
    // runc applies `ro` to a bind with a remount of its own, so the mount is really read-only.
    options.push(if m.readonly { "ro" } else { "rw" }.to_string());
    MountBuilder::default()
        .destination(PathBuf::from(&m.destination))
        .typ("bind")
        .source(m.source.clone())
        .options(options)
        .build()
        .map_err(bad)
}

/// Later entries of the same NAME replace earlier ones.
pub fn merge_env(entries: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in entries {
        let name = e.split('=').next().unwrap_or("");
        out.retain(|o| o.split('=').next() != Some(name));
        out.push(e.clone());
    }
    out
}

/// The capability sets of the process: exactly `names`, in every set but the ambient one.
fn capabilities(names: &[String]) -> Result<oci_spec::runtime::LinuxCapabilities> {
    let mut set = oci_spec::runtime::Capabilities::new();
    for n in names {
        let cap: Capability = serde_json::from_value(serde_json::json!(n)).map_err(|_| {
            RuntimeError::invalid(format!("capability `{n}`"), "not a Linux capability name")
        })?;
        set.insert(cap);
    }
    LinuxCapabilitiesBuilder::default()
        .bounding(set.clone())
        .effective(set.clone())
        .permitted(set.clone())
        .inheritable(oci_spec::runtime::Capabilities::new())
        .ambient(oci_spec::runtime::Capabilities::new())
        .build()
        .map_err(bad)
}

/// CPU shares, and a quota of `cpus` CPUs over a 100 ms period where one is set.
fn cpu(l: &Limits) -> Result<oci_spec::runtime::LinuxCpu> {
    let mut b = LinuxCpuBuilder::default().shares(l.cpu_shares);
    if let Some(cpus) = l.cpus {
        if !(cpus.is_finite() && cpus > 0.0) {
            return Err(RuntimeError::invalid(
                "cpus",
                format!("{cpus}: must be above 0"),
            ));
        }
        let period = 100_000u64;
        b = b
            .period(period)
            .quota((cpus * period as f64).round().max(1000.0) as i64);
    }
    b.build().map_err(bad)
}

pub fn build_spec(c: &ContainerConfig) -> Result<Spec> {
    let mut spec = Spec::default();
    let mut gids = c.devices.additional_gids.clone();
    gids.sort_unstable();
    gids.dedup();
    let mut env = c.env.clone();
    env.extend(c.devices.env.iter().cloned());
    let process = ProcessBuilder::default()
        .terminal(false)
        .args(c.args.clone())
        .env(merge_env(&env))
        .cwd(PathBuf::from(&c.cwd))
        .user(
            UserBuilder::default()
                .uid(c.uid)
                .gid(c.gid)
                .additional_gids(gids)
                .build()
                .map_err(bad)?,
        )
        .no_new_privileges(true)
        .capabilities(capabilities(&c.capabilities)?)
        .build()
        .map_err(bad)?;
    spec.set_process(Some(process));
    spec.set_hostname(Some(c.hostname.clone()));
    spec.set_root(Some(
        RootBuilder::default()
            .path("rootfs")
            .readonly(c.readonly_rootfs)
            .build()
            .map_err(bad)?,
    ));

    let mut mounts: Vec<Mount> = spec.mounts().clone().unwrap_or_default();
    if c.seccomp == crate::seccomp::Profile::Evaluator {
        // POSIX message queues outlive their processes: an evaluator's are refused by its
        // seccomp profile (mq_open), and without this mount none can be made by open(2).
        mounts.retain(|m| m.destination() != Path::new("/dev/mqueue"));
    }
    mounts.push(
        MountBuilder::default()
            .destination("/tmp")
            .typ("tmpfs")
            .source("tmpfs")
            .options(vec![
                "nosuid".to_string(),
                "nodev".to_string(),
                "mode=1777".to_string(),
                format!("size={}", c.tmp_bytes),
            ])
            .build()
            .map_err(bad)?,
    );
    for t in &c.tmpfs {
        check_destination(&t.destination)?;
        mounts.push(
            MountBuilder::default()
                .destination(PathBuf::from(&t.destination))
                .typ("tmpfs")
                .source("tmpfs")
                .options(vec![
                    "nosuid".to_string(),
                    "nodev".to_string(),
                    format!("mode={:o}", t.mode),
                    format!("uid={}", t.uid),
                    format!("gid={}", t.gid),
                    format!("size={}", t.bytes),
                ])
                .build()
                .map_err(bad)?,
        );
    }
    for m in c.binds.iter().chain(c.devices.mounts.iter()) {
        mounts.push(bind(m)?);
    }
    if c.network == Network::Host {
        for f in ["/etc/resolv.conf", "/etc/hosts"] {
            if std::path::Path::new(f).exists() {
                mounts.push(bind(&BindMount {
                    source: f.into(),
                    destination: f.into(),
                    readonly: true,
                })?);
            }
        }
    }
    spec.set_mounts(Some(mounts));

    let base = spec.linux().clone().unwrap_or_default();
    let mut namespaces = base.namespaces().clone().unwrap_or_default();
    if c.network == Network::Host {
        namespaces.retain(|n| n.typ() != LinuxNamespaceType::Network);
    }
    // Deny every device, then allow the GPU's nodes (runc adds the standard /dev/null & co).
    let mut rules = vec![LinuxDeviceCgroupBuilder::default()
        .allow(false)
        .access("rwm")
        .build()
        .map_err(bad)?];
    let mut devices = Vec::new();
    for d in &c.devices.devices {
        let typ = if d.kind == 'b' {
            LinuxDeviceType::B
        } else {
            LinuxDeviceType::C
        };
        devices.push(
            LinuxDeviceBuilder::default()
                .path(PathBuf::from(&d.path))
                .typ(typ)
                .major(d.major)
                .minor(d.minor)
                .file_mode(d.file_mode)
                .uid(d.uid)
                .gid(d.gid)
                .build()
                .map_err(bad)?,
        );
        rules.push(
            LinuxDeviceCgroupBuilder::default()
                .allow(true)
                .typ(typ)
                .major(d.major)
                .minor(d.minor)
                .access("rwm")
                .build()
                .map_err(bad)?,
        );
    }
    let resources = LinuxResourcesBuilder::default()
        .devices(rules)
        .memory(
            LinuxMemoryBuilder::default()
                .limit(c.limits.memory_bytes)
                // Same as the limit: no swap on top of it.
                .swap(c.limits.memory_bytes)
                .build()
                .map_err(bad)?,
        )
        .pids(
            LinuxPidsBuilder::default()
                .limit(c.limits.pids)
                .build()
                .map_err(bad)?,
        )
        .cpu(cpu(&c.limits)?)
        .build()
        .map_err(bad)?;
    let linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .devices(devices)
        .resources(resources)
        .masked_paths(base.masked_paths().clone().unwrap_or_default())
        .readonly_paths(base.readonly_paths().clone().unwrap_or_default())
        .seccomp(crate::seccomp::profile(c.seccomp)?)
        .build()
        .map_err(bad)?;
    spec.set_linux(Some(linux));
    Ok(spec)
}

#[cfg(test)]
mod tests;
