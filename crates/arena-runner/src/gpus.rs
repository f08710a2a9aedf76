//! The GPUs a runner leases to tasks, one task per GPU at a time (clean timing needs the whole
//! device). Found on the host (`/dev/nvidiaN`; `/dev/kfd` with `/dev/dri/renderD*`), given as
//! an explicit list, or fake (slots with no device, for scheduling tests and CPU tasks).

use std::path::{Path, PathBuf};

use arena_runtime::GpuProfile;

use crate::error::{Result, RunnerError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    pub index: u32,
    /// `nvidia`, `amd`, `fake` or `none` (a CPU slot).
    pub kind: String,
    pub profile: GpuProfile,
    /// Host device nodes this GPU brings (for listings).
    pub devices: Vec<String>,
}

/// Parses a `--gpus` value:
/// - `auto`: every NVIDIA or AMD GPU found under `/dev`; one CPU slot if none;
/// - `none` or `cpu:N`: N slots (default 1) without devices, for CPU tasks;
/// - `fake:N`: N fake GPUs without devices (tests of the scheduler);
/// - `nvidia:0,2` or `amd:renderD128,renderD129`: exactly those.
pub fn parse_gpus(spec: &str) -> Result<Vec<Gpu>> {
    parse_gpus_at(spec, Path::new("/dev"))
}

pub fn parse_gpus_at(spec: &str, dev: &Path) -> Result<Vec<Gpu>> {
    let bad = |m: String| RunnerError::invalid("--gpus", spec, m);
    let (kind, arg) = spec.split_once(':').unwrap_or((spec, ""));
    let count = |arg: &str| -> Result<u32> {
        if arg.is_empty() {
            return Ok(1);
        }
        match arg.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(bad(format!("`{arg}`: expected a count of at least 1"))),
        }
    };
    let slots = |n: u32, kind: &str| -> Vec<Gpu> {
        (0..n)
            .map(|i| Gpu {
                index: i,
                kind: kind.into(),
                profile: GpuProfile::None,
                devices: Vec::new(),
            })
            .collect()
    };
    match kind {
        "auto" => {
            let nv = nvidia_indices(dev);
            if !nv.is_empty() {
                return Ok(nv.into_iter().map(|i| nvidia(dev, i)).collect());
            }
            let amd = render_nodes(dev);
            if dev.join("kfd").exists() && !amd.is_empty() {
                return Ok(amd
                    .into_iter()
                    .enumerate()
                    .map(|(i, n)| amd_gpu(dev, i as u32, n))
                    .collect());
            }
            Ok(slots(1, "none"))
        }
        "none" | "cpu" => Ok(slots(count(arg)?, "none")),
        "fake" => Ok(slots(count(arg)?, "fake")),
        "nvidia" => {
            let mut out = Vec::new();
            for (slot, s) in arg.split(',').filter(|s| !s.is_empty()).enumerate() {
                let i: u32 = s
                    .parse()
                    .map_err(|_| bad(format!("`{s}`: expected an NVIDIA GPU index")))?;
                if !dev.join(format!("nvidia{i}")).exists() {
                    return Err(bad(format!("{}/nvidia{i} does not exist", dev.display())));
                }
                let mut g = nvidia(dev, i);
                g.index = slot as u32;
                out.push(g);
            }
            if out.is_empty() {
                return Err(bad("list the GPU indices, e.g. nvidia:0,1".into()));
            }
            Ok(out)
        }
        "amd" => {
            let mut out = Vec::new();
            for (slot, s) in arg.split(',').filter(|s| !s.is_empty()).enumerate() {
                let node = dev.join("dri").join(s);
                if !node.exists() {
                    return Err(bad(format!("{} does not exist", node.display())));
                }
                out.push(amd_gpu(dev, slot as u32, node));
            }
            if out.is_empty() {
                return Err(bad("list the render nodes, e.g. amd:renderD128".into()));
            }
            Ok(out)
        }
        other => Err(bad(format!(
            "`{other}`: expected auto, none, cpu:N, fake:N, nvidia:I,… or amd:renderDN,…"
        ))),
    }
}

/// Applies what Slurm (or a user) allowed this process: `CUDA_VISIBLE_DEVICES`,
/// `ROCR_VISIBLE_DEVICES`/`HIP_VISIBLE_DEVICES` as indices into the found GPUs.
pub fn restrict_visible(gpus: Vec<Gpu>, visible: Option<&str>) -> Result<Vec<Gpu>> {
    let Some(v) = visible.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(gpus);
    };
    let mut out = Vec::new();
    for s in v.split(',') {
        let i: usize = s.trim().parse().map_err(|_| {
            RunnerError::invalid(
                "visible devices",
                s,
                "expected a GPU index (UUIDs are not supported)",
            )
        })?;
        let g = gpus.get(i).ok_or_else(|| {
            RunnerError::invalid(
                "visible devices",
                s,
                format!("index {i} but only {} GPUs were found", gpus.len()),
            )
        })?;
        out.push(g.clone());
    }
    Ok(out)
}

fn nvidia_indices(dev: &Path) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_dir(dev)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            n.strip_prefix("nvidia")?.parse().ok()
        })
        .collect();
    out.sort();
    out
}

fn nvidia(dev: &Path, i: u32) -> Gpu {
    Gpu {
        index: i,
        kind: "nvidia".into(),
        profile: GpuProfile::Nvidia {
            dev_dir: dev.to_path_buf(),
            index: i,
            driver_dir: None,
        },
        devices: vec![dev.join(format!("nvidia{i}")).display().to_string()],
    }
}

fn render_nodes(dev: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dev.join("dri"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("renderD"))
        })
        .collect();
    out.sort();
    out
}

fn amd_gpu(dev: &Path, index: u32, node: PathBuf) -> Gpu {
    Gpu {
        index,
        kind: "amd".into(),
        devices: vec![
            dev.join("kfd").display().to_string(),
            node.display().to_string(),
        ],
        profile: GpuProfile::Amd {
            kfd: dev.join("kfd"),
            dri_nodes: vec![node],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_and_cpu_slots() {
        let g = parse_gpus("fake:4").unwrap();
        assert_eq!(g.len(), 4);
        assert_eq!(g[3].index, 3);
        assert_eq!(g[0].profile, GpuProfile::None);
        assert_eq!(parse_gpus("none").unwrap().len(), 1);
        assert_eq!(parse_gpus("cpu:2").unwrap()[1].kind, "none");
    }

    #[test]
    fn found_nvidia_nodes_in_a_dev_dir() {
        let d = tempfile::tempdir().unwrap();
        for n in ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"] {
            std::fs::write(d.path().join(n), "").unwrap();
        }
        let g = parse_gpus_at("auto", d.path()).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].kind, "nvidia");
        let one = parse_gpus_at("nvidia:1", d.path()).unwrap();
        assert_eq!(one.len(), 1);
        assert!(one[0].devices[0].ends_with("nvidia1"));
        assert!(parse_gpus_at("nvidia:5", d.path())
            .unwrap_err()
            .to_string()
            .contains("nvidia5 does not exist"));
    }

    #[test]
    fn bad_specs_are_named() {
        for s in ["fake:0", "fake:x", "tpu:1", "nvidia:"] {
            let e = parse_gpus(s).unwrap_err().to_string();
            assert!(e.starts_with("--gpus: "), "{e}");
        }
    }

    #[test]
    fn visible_devices_pick_by_index() {
        let g = parse_gpus("fake:4").unwrap();
        let v = restrict_visible(g.clone(), Some("2,0")).unwrap();
        assert_eq!(v.iter().map(|g| g.index).collect::<Vec<_>>(), [2, 0]);
        assert_eq!(restrict_visible(g.clone(), None).unwrap().len(), 4);
        assert!(restrict_visible(g, Some("7")).is_err());
    }
}
