//! GPU device profiles: which device nodes, mounts, groups and environment a container gets
//! for the one GPU it leased. Only the leased GPU's nodes are passed in.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};

/// A device node to create in the container (and allow in its device cgroup).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceNode {
    /// Path inside the container.
    pub path: String,
    /// `c` or `b`.
    pub kind: char,
    pub major: i64,
    pub minor: i64,
    pub file_mode: u32,
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BindMount {
    pub source: PathBuf,
    pub destination: String,
    pub readonly: bool,
}

/// What a profile adds to a container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeviceGrant {
    pub devices: Vec<DeviceNode>,
    pub mounts: Vec<BindMount>,
    /// Supplementary groups (the `video` and `render` groups of AMD nodes, the owners of nodes).
    pub additional_gids: Vec<u32>,
    pub env: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "profile", rename_all = "lowercase")]
pub enum GpuProfile {
    None,
    /// `/dev/kfd` plus the leased GPU's DRM nodes (`/dev/dri/renderD128`, `/dev/dri/card0`…).
    Amd {
        kfd: PathBuf,
        dri_nodes: Vec<PathBuf>,
    },
    /// `/dev/nvidia<index>` plus the control and UVM nodes, and the driver's user-space
    /// libraries bind-mounted read-only from `driver_dir` (at the same path inside).
    Nvidia {
        dev_dir: PathBuf,
        index: u32,
        driver_dir: Option<PathBuf>,
    },
    /// The `containerEdits` of a Container Device Interface spec for one named device.
    Cdi {
        spec: PathBuf,
        device: String,
    },
}

/// Major and minor numbers of a Linux `dev_t` (glibc's encoding).
pub fn major_minor(rdev: u64) -> (i64, i64) {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & 0xffff_f000);
    let minor = (rdev & 0xff) | ((rdev >> 12) & 0xffff_ff00);
    (major as i64, minor as i64)
}

/// Reads a device node on the host; `container_path` is where it appears inside.
pub fn device_node(host: &Path, container_path: &str) -> Result<DeviceNode> {
    let meta = std::fs::metadata(host).map_err(|e| RuntimeError::io(host, e))?;
    let ft = meta.file_type();
    let kind = if ft.is_char_device() {
        'c'
    } else if ft.is_block_device() {
        'b'
    } else {
        return Err(RuntimeError::invalid(
            host.display().to_string(),
            "not a device node",
        ));
    };
    let (major, minor) = major_minor(meta.rdev());
    Ok(DeviceNode {
        path: container_path.to_string(),
        kind,
        major,
        minor,
        file_mode: meta.mode() & 0o7777,
        uid: 0,
        gid: meta.gid(),
    })
}

/// Group ids named in a group file (`/etc/group`).
pub fn group_ids(group_file: &Path, names: &[&str]) -> Vec<u32> {
    let text = std::fs::read_to_string(group_file).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split(':');
        let (Some(name), _, Some(gid)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if names.contains(&name) {
            if let Ok(g) = gid.parse() {
                out.push(g);
            }
        }
    }
    out
}

fn add_gid(g: &mut DeviceGrant, gid: u32) {
    if gid != 0 && !g.additional_gids.contains(&gid) {
        g.additional_gids.push(gid);
    }
}

impl GpuProfile {
    /// Resolves the profile against the host: stats each node, reads groups and CDI specs.
    pub fn resolve(&self) -> Result<DeviceGrant> {
        let mut g = DeviceGrant::default();
        match self {
            GpuProfile::None => {}
            GpuProfile::Amd { kfd, dri_nodes } => {
                g.devices.push(device_node(kfd, "/dev/kfd")?);
                for n in dri_nodes {
                    let name = n.file_name().and_then(|s| s.to_str()).ok_or_else(|| {
                        RuntimeError::invalid(n.display().to_string(), "not a DRM node path")
                    })?;
                    g.devices.push(device_node(n, &format!("/dev/dri/{name}"))?);
                }
                for gid in group_ids(Path::new("/etc/group"), &["video", "render"]) {
                    add_gid(&mut g, gid);
                }
            }
            GpuProfile::Nvidia {
                dev_dir,
                index,
                driver_dir,
            } => {
                g.devices.push(device_node(
                    &dev_dir.join(format!("nvidia{index}")),
                    &format!("/dev/nvidia{index}"),
                )?);
                for n in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] {
                    g.devices
                        .push(device_node(&dev_dir.join(n), &format!("/dev/{n}"))?);
                }
                if let Some(d) = driver_dir {
                    g.mounts.push(BindMount {
                        source: d.clone(),
                        destination: d.display().to_string(),
                        readonly: true,
                    });
                    g.env.push(format!(
                        "LD_LIBRARY_PATH={}/lib64:{}/lib",
                        d.display(),
                        d.display()
                    ));
                }
                // CUDA numbers the visible devices from 0 inside the container.
                g.env.push("CUDA_VISIBLE_DEVICES=0".into());
            }
            GpuProfile::Cdi { spec, device } => apply_cdi(&mut g, spec, device)?,
        }
        let gids: Vec<u32> = g.devices.iter().map(|d| d.gid).collect();
        for gid in gids {
            add_gid(&mut g, gid);
        }
        Ok(g)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CdiSpec {
    kind: String,
    #[serde(default)]
    devices: Vec<CdiDevice>,
    #[serde(default)]
    container_edits: Option<CdiEdits>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CdiDevice {
    name: String,
    container_edits: CdiEdits,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CdiEdits {
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    device_nodes: Vec<CdiNode>,
    #[serde(default)]
    mounts: Vec<CdiMount>,
    #[serde(default)]
    additional_gids: Vec<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CdiNode {
    path: String,
    host_path: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    major: Option<i64>,
    minor: Option<i64>,
    file_mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CdiMount {
    host_path: String,
    container_path: String,
    #[serde(default)]
    options: Vec<String>,
}

fn apply_edits(g: &mut DeviceGrant, e: &CdiEdits, spec: &Path) -> Result<()> {
    g.env.extend(e.env.iter().cloned());
    for n in &e.device_nodes {
        let host = n.host_path.as_deref().unwrap_or(&n.path);
        let mut node = match (n.major, n.minor) {
            (Some(major), Some(minor)) => DeviceNode {
                path: n.path.clone(),
                kind: n
                    .kind
                    .as_deref()
                    .and_then(|k| k.chars().next())
                    .unwrap_or('c'),
                major,
                minor,
                file_mode: 0o666,
                uid: 0,
                gid: 0,
            },
            _ => device_node(Path::new(host), &n.path).map_err(|e| {
                RuntimeError::invalid(
                    spec.display().to_string(),
                    format!("device node {}: {e}", n.path),
                )
            })?,
        };
        if let Some(m) = n.file_mode {
            node.file_mode = m;
        }
        if let Some(u) = n.uid {
            node.uid = u;
        }
        if let Some(gid) = n.gid {
            node.gid = gid;
        }
        g.devices.push(node);
    }
    for m in &e.mounts {
        g.mounts.push(BindMount {
            source: PathBuf::from(&m.host_path),
            destination: m.container_path.clone(),
            readonly: m.options.iter().any(|o| o == "ro"),
        });
    }
    for gid in &e.additional_gids {
        add_gid(g, *gid);
    }
    Ok(())
}

fn apply_cdi(g: &mut DeviceGrant, spec: &Path, device: &str) -> Result<()> {
    let text = std::fs::read_to_string(spec).map_err(|e| RuntimeError::io(spec, e))?;
    // JSON is YAML, so one parser reads both forms of a CDI spec.
    let s: CdiSpec = serde_norway::from_str(&text).map_err(|e| {
        RuntimeError::invalid(spec.display().to_string(), format!("not a CDI spec: {e}"))
    })?;
    // Accept the fully qualified name (`vendor/class=name`) or the bare name.
    let name = match device.split_once('=') {
        Some((kind, name)) if kind == s.kind => name,
        Some((kind, _)) => {
            return Err(RuntimeError::invalid(
                spec.display().to_string(),
                format!(
                    "device `{device}` is of kind `{kind}`, this spec describes `{}`",
                    s.kind
                ),
            ))
        }
        None => device,
    };
    let dev = s.devices.iter().find(|d| d.name == name).ok_or_else(|| {
        RuntimeError::invalid(
            spec.display().to_string(),
            format!(
                "no device `{name}` (devices: {})",
                s.devices
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    if let Some(global) = &s.container_edits {
        apply_edits(g, global, spec)?;
    }
    apply_edits(g, &dev.container_edits, spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_t_decoding() {
        // /dev/null is 1:3, /dev/nvidia-uvm often 511:0, render nodes 226:128.
        assert_eq!(major_minor(0x103), (1, 3));
        assert_eq!(major_minor((226 << 8) | 128), (226, 128));
        // Numbers beyond 12 bits (major) and 8 bits (minor) use the high halves of dev_t.
        let (major, minor): (u64, u64) = (0x1234, 0x56789);
        let big = ((major & 0xfff) << 8)
            | ((major & !0xfff) << 32)
            | (minor & 0xff)
            | ((minor & !0xff) << 12);
        assert_eq!(major_minor(big), (0x1234, 0x56789));
    }

    #[test]
    fn host_nodes_are_read() {
        let n = device_node(Path::new("/dev/zero"), "/dev/kfd").unwrap();
        assert_eq!((n.kind, n.major, n.minor), ('c', 1, 5));
        assert_eq!(n.path, "/dev/kfd");
        let e = device_node(Path::new("/etc/hostname"), "/dev/x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a device node"), "{e}");
    }

    #[test]
    fn amd_profile_with_stand_in_nodes() {
        let g = GpuProfile::Amd {
            kfd: "/dev/zero".into(),
            dri_nodes: vec!["/dev/null".into()],
        }
        .resolve()
        .unwrap();
        assert_eq!(g.devices[0].path, "/dev/kfd");
        assert_eq!((g.devices[0].major, g.devices[0].minor), (1, 5));
        assert_eq!(g.devices[1].path, "/dev/dri/null");
        assert!(g.mounts.is_empty());
    }

    #[test]
    fn nvidia_profile_names_only_the_leased_gpu() {
        let d = tempfile::tempdir().unwrap();
        // Stand-ins: device nodes cannot be made without privileges everywhere, so point the
        // profile at a directory of symlinks to harmless host nodes.
        for (n, target) in [
            ("nvidia1", "/dev/zero"),
            ("nvidia0", "/dev/full"),
            ("nvidiactl", "/dev/null"),
            ("nvidia-uvm", "/dev/null"),
            ("nvidia-uvm-tools", "/dev/null"),
        ] {
            std::os::unix::fs::symlink(target, d.path().join(n)).unwrap();
        }
        let g = GpuProfile::Nvidia {
            dev_dir: d.path().into(),
            index: 1,
            driver_dir: Some("/usr/local/nvidia".into()),
        }
        .resolve()
        .unwrap();
        let paths: Vec<_> = g.devices.iter().map(|x| x.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/dev/nvidia1",
                "/dev/nvidiactl",
                "/dev/nvidia-uvm",
                "/dev/nvidia-uvm-tools"
            ]
        );
        assert_eq!((g.devices[0].major, g.devices[0].minor), (1, 5));
        assert_eq!(g.mounts[0].destination, "/usr/local/nvidia");
        assert!(g.mounts[0].readonly);
        assert!(g.env.contains(&"CUDA_VISIBLE_DEVICES=0".to_string()));
    }

    #[test]
    fn cdi_specs_in_json_and_yaml() {
        let d = tempfile::tempdir().unwrap();
        let json = d.path().join("amd.json");
        std::fs::write(
            &json,
            r#"{"cdiVersion":"0.6.0","kind":"amd.com/gpu","containerEdits":{"env":["A=1"]},
               "devices":[{"name":"0","containerEdits":{"deviceNodes":[{"path":"/dev/kfd","hostPath":"/dev/zero"},
               {"path":"/dev/dri/renderD128","type":"c","major":226,"minor":128}],
               "mounts":[{"hostPath":"/opt/rocm","containerPath":"/opt/rocm","options":["ro","bind"]}]}}]}"#,
        )
        .unwrap();
        let g = GpuProfile::Cdi {
            spec: json.clone(),
            device: "amd.com/gpu=0".into(),
        }
        .resolve()
        .unwrap();
        assert_eq!(g.env, ["A=1"]);
        assert_eq!((g.devices[0].major, g.devices[0].minor), (1, 5));
        assert_eq!((g.devices[1].major, g.devices[1].minor), (226, 128));
        assert!(g.mounts[0].readonly);
        let yaml = d.path().join("nv.yaml");
        std::fs::write(
            &yaml,
            "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n- name: gpu1\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia1\n      hostPath: /dev/null\n",
        )
        .unwrap();
        let g = GpuProfile::Cdi {
            spec: yaml.clone(),
            device: "gpu1".into(),
        }
        .resolve()
        .unwrap();
        assert_eq!(g.devices[0].path, "/dev/nvidia1");
        let e = GpuProfile::Cdi {
            spec: yaml,
            device: "gpu7".into(),
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(e.contains("no device `gpu7` (devices: gpu1)"), "{e}");
        let e = GpuProfile::Cdi {
            spec: json,
            device: "nvidia.com/gpu=0".into(),
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(e.contains("is of kind `nvidia.com/gpu`"), "{e}");
    }
}
