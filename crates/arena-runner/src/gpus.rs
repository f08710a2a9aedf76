//! The GPUs a runner leases to tasks, one task per GPU at a time (clean timing needs the whole
//! device). Found on the host (`/dev/nvidiaN`; `/dev/kfd` with `/dev/dri/renderD*`), given as
//! an explicit list, or fake (slots with no device, for scheduling tests and CPU tasks).

use std::path::{Path, PathBuf};

use arena_run::result::GpuRecord;
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

/// The kind of a CPU slot, as the task runs on it record it ([`GpuRecord::is_device`]).
const CPU_SLOT: &str = GpuRecord::CPU_SLOT;

impl Gpu {
    /// Whether a device comes with it (a CPU slot or a fake GPU brings none).
    pub fn has_device(&self) -> bool {
        !matches!(self.profile, GpuProfile::None)
    }

    /// Whether it is a CPU slot (a fake GPU is not: the scheduler's tests stand it in for a
    /// device).
    pub fn is_cpu_slot(&self) -> bool {
        self.kind == CPU_SLOT
    }
}

/// Parses a `--gpus` value:
/// - `auto`: every NVIDIA or AMD GPU found under `/dev`; one CPU slot if none;
/// - `none` or `cpu:N`: N slots (default 1) without devices, for CPU tasks;
/// - `fake:N`: N fake GPUs without devices (tests of the scheduler);
/// - `nvidia:0,2` or `amd:renderD128,renderD129`: exactly those;
/// - `cdi:SPEC:DEVICE,…`: devices of a Container Device Interface spec, e.g.
///   `cdi:/etc/cdi/nvidia.yaml:nvidia.com/gpu=0` (what `nvidia-ctk cdi generate` writes on a
///   host whose driver libraries sit among the system's; the spec lists them);
/// - `slurm`: the one GPU Slurm gave this job (see [`slurm_gpu`]).
pub fn parse_gpus(spec: &str) -> Result<Vec<Gpu>> {
    if spec == "slurm" {
        return Ok(vec![slurm_gpu(Path::new("/dev"), |k| {
            std::env::var(k).ok()
        })?]);
    }
    parse_gpus_at(spec, Path::new("/dev"))
}

/// The GPUs a runner started with `--gpus SPEC` uses (see [`parse_gpus`]): with `auto`, only
/// those of the visible-device list this process was given ([`visible_from_env`]), so that a
/// runner started by a scheduler stays on what it was handed.
pub fn for_host(spec: &str) -> Result<Vec<Gpu>> {
    let gpus = parse_gpus(spec)?;
    if spec != "auto" {
        return Ok(gpus);
    }
    restrict_visible(gpus, visible_from_env().as_deref())
}

/// Where Slurm says which GPU a job holds, most specific first: the node's GPU index
/// (`SLURM_JOB_GPUS`, `SLURM_STEP_GPUS`), then the visible-device lists it sets
/// (arena_eval::trusted::VISIBLE_DEVICE_VARS).
fn slurm_gpu_vars() -> impl Iterator<Item = &'static str> {
    ["SLURM_JOB_GPUS", "SLURM_STEP_GPUS"]
        .into_iter()
        .chain(arena_eval::trusted::VISIBLE_DEVICE_VARS)
}

/// The visible-device list this process was given, if any (the first of
/// arena_eval::trusted::VISIBLE_DEVICE_VARS that is set): what `--gpus auto` is cut to.
pub fn visible_from_env() -> Option<String> {
    arena_eval::trusted::VISIBLE_DEVICE_VARS
        .iter()
        .find_map(|k| std::env::var(k).ok())
}

/// The GPU Slurm allocated to this job (`--gres=gpu:1`), mapped to a device profile so that
/// only that GPU enters the containers: `/dev/nvidiaN` if present, else the N-th AMD render
/// node (with `/dev/kfd`), else a slot without a device carrying Slurm's index (a node whose
/// "GPUs" are Slurm gres stand-ins, as in CI).
pub fn slurm_gpu(dev: &Path, env: impl Fn(&str) -> Option<String>) -> Result<Gpu> {
    let (var, value) = slurm_gpu_vars()
        .find_map(|k| env(k).filter(|v| !v.trim().is_empty()).map(|v| (k, v)))
        .ok_or_else(|| {
            RunnerError::invalid(
                "--gpus",
                "slurm",
                format!(
                    "none of {} is set: not inside a Slurm job with --gres=gpu:1",
                    slurm_gpu_vars().collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
    let first = value.split(',').next().unwrap_or("").trim();
    let i: u32 = first.parse().map_err(|_| {
        RunnerError::invalid(
            var,
            &value,
            "expected a GPU index (UUIDs are not supported)",
        )
    })?;
    if dev.join(format!("nvidia{i}")).exists() {
        return Ok(nvidia(dev, i));
    }
    let amd = render_nodes(dev);
    if dev.join("kfd").exists() {
        if let Some(node) = amd.get(i as usize) {
            return Ok(amd_gpu(dev, i, node.clone()));
        }
    }
    Ok(Gpu {
        index: i,
        kind: "fake".into(),
        profile: GpuProfile::None,
        devices: Vec::new(),
    })
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
            Ok(slots(1, CPU_SLOT))
        }
        "none" | "cpu" => Ok(slots(count(arg)?, CPU_SLOT)),
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
        "cdi" => {
            let (path, names) = arg.rsplit_once(':').ok_or_else(|| {
                bad("expected cdi:SPEC:DEVICE,…, e.g. cdi:/etc/cdi/nvidia.yaml:nvidia.com/gpu=0".into())
            })?;
            let spec = PathBuf::from(path);
            let mut out = Vec::new();
            for (slot, name) in names.split(',').filter(|s| !s.is_empty()).enumerate() {
                let profile = GpuProfile::Cdi {
                    spec: spec.clone(),
                    device: name.to_string(),
                };
                // Resolved now so that a wrong spec or device name stops the run before any
                // task starts, naming the spec.
                let grant = profile.resolve().map_err(|e| bad(e.to_string()))?;
                out.push(Gpu {
                    index: slot as u32,
                    kind: cdi_kind(name).into(),
                    devices: grant.devices.iter().map(|d| d.path.clone()).collect(),
                    profile,
                });
            }
            if out.is_empty() {
                return Err(bad("name the spec's devices, e.g. cdi:/etc/cdi/nvidia.yaml:nvidia.com/gpu=0".into()));
            }
            Ok(out)
        }
        other => Err(bad(format!(
            "`{other}`: expected auto, none, cpu:N, fake:N, nvidia:I,…, amd:renderDN,… or cdi:SPEC:DEVICE,…"
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

/// The vendor a CDI device name belongs to (`nvidia.com/gpu=0` → `nvidia`), which the
/// prompt's GPU pre-check names; `cdi` for others.
fn cdi_kind(name: &str) -> &'static str {
    match name.split('/').next().unwrap_or("") {
        "nvidia.com" => "nvidia",
        "amd.com" => "amd",
        _ => "cdi",
    }
}

/// Where the NVIDIA driver's user-space libraries live as one directory of their own, bind-
/// mounted read-only into every container that gets the GPU (the image never carries a
/// driver, whose version must match the kernel module's): `$ARENA_NVIDIA_DRIVER_DIR` (empty:
/// none), else `/usr/local/nvidia` with a `lib64` inside (the layout of GPU container hosts
/// such as GKE's). Hosts with the driver among the system libraries use `--gpus cdi:…`.
pub fn nvidia_driver_dir() -> Option<PathBuf> {
    driver_dir_from(
        std::env::var_os("ARENA_NVIDIA_DRIVER_DIR").map(PathBuf::from),
        Path::new("/usr/local/nvidia"),
    )
}

fn driver_dir_from(var: Option<PathBuf>, default: &Path) -> Option<PathBuf> {
    match var {
        Some(d) if d.as_os_str().is_empty() => None,
        Some(d) => Some(d),
        None => default
            .join("lib64")
            .is_dir()
            .then(|| default.to_path_buf()),
    }
}

fn nvidia(dev: &Path, i: u32) -> Gpu {
    Gpu {
        index: i,
        kind: "nvidia".into(),
        profile: GpuProfile::Nvidia {
            dev_dir: dev.to_path_buf(),
            index: i,
            driver_dir: nvidia_driver_dir(),
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
    fn the_slurm_gpu_comes_from_the_job_environment() {
        let d = tempfile::tempdir().unwrap();
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        // No device nodes: a slot with Slurm's index.
        let g = slurm_gpu(d.path(), env(&[("SLURM_JOB_GPUS", "2")])).unwrap();
        assert_eq!((g.index, g.kind.as_str()), (2, "fake"));
        // SLURM_JOB_GPUS wins over CUDA_VISIBLE_DEVICES (which may be renumbered).
        std::fs::write(d.path().join("nvidia1"), "").unwrap();
        let g = slurm_gpu(
            d.path(),
            env(&[("CUDA_VISIBLE_DEVICES", "0"), ("SLURM_JOB_GPUS", "1")]),
        )
        .unwrap();
        assert_eq!((g.index, g.kind.as_str()), (1, "nvidia"));
        assert!(g.devices[0].ends_with("nvidia1"));
        let e = slurm_gpu(d.path(), env(&[])).unwrap_err().to_string();
        assert!(e.contains("SLURM_JOB_GPUS"), "{e}");
        let e = slurm_gpu(d.path(), env(&[("SLURM_JOB_GPUS", "GPU-3f2a")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("UUIDs"), "{e}");
    }

    #[test]
    fn the_driver_dir_is_the_variable_else_a_default_with_lib64() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(driver_dir_from(None, d.path()), None);
        std::fs::create_dir(d.path().join("lib64")).unwrap();
        assert_eq!(
            driver_dir_from(None, d.path()),
            Some(d.path().to_path_buf())
        );
        assert_eq!(driver_dir_from(Some("".into()), d.path()), None);
        assert_eq!(
            driver_dir_from(Some("/opt/nv".into()), d.path()),
            Some(PathBuf::from("/opt/nv"))
        );
    }

    #[test]
    fn cdi_devices_come_from_the_spec() {
        let d = tempfile::tempdir().unwrap();
        // Regular files stand in for the device nodes: a CDI node with its type, major and
        // minor given is taken as written.
        let spec = d.path().join("nvidia.yaml");
        std::fs::write(
            &spec,
            r#"cdiVersion: "0.5.0"
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - {path: /dev/nvidia0, type: c, major: 195, minor: 0}
  - name: "1"
    containerEdits:
      deviceNodes:
        - {path: /dev/nvidia1, type: c, major: 195, minor: 1}
containerEdits:
  deviceNodes:
    - {path: /dev/nvidiactl, type: c, major: 195, minor: 255}
"#,
        )
        .unwrap();
        let g = parse_gpus(&format!("cdi:{}:nvidia.com/gpu=1,0", spec.display())).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].index, g[0].kind.as_str()), (0, "nvidia"));
        assert!(
            g[0].devices.contains(&"/dev/nvidia1".to_string()),
            "{:?}",
            g[0].devices
        );
        assert!(g[0].devices.contains(&"/dev/nvidiactl".to_string()));
        assert!(!g[0].devices.contains(&"/dev/nvidia0".to_string()));
        let e = parse_gpus(&format!("cdi:{}:nvidia.com/gpu=7", spec.display()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no device `7`") && e.contains("nvidia.yaml"),
            "{e}"
        );
        let e = parse_gpus("cdi:/nonexistent/spec.yaml:x=0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/spec.yaml"), "{e}");
        assert!(parse_gpus("cdi:nocolon").is_err());
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
