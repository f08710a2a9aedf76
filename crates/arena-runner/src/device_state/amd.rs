//! AMD: the amdgpu driver's sysfs files of the leased render node. `pp_dpm_sclk` and
//! `pp_dpm_mclk` list the clock levels with the current one marked `*`; hwmon gives the edge
//! temperature in millidegrees and the power in microwatts; `power_dpm_force_performance_level`
//! says whether clocks are pinned (`manual`, `profile_*`) or left to the driver (`auto`).

use std::path::{Path, PathBuf};

use arena_run::result::DeviceReading;

use super::DeviceReader;

pub struct AmdSysfs {
    device: PathBuf,
}

impl AmdSysfs {
    /// The device of render node `renderD128` under /sys/class/drm.
    pub fn for_node(render: &str) -> AmdSysfs {
        AmdSysfs::at(Path::new("/sys/class/drm").join(render).join("device"))
    }

    /// The device directory itself (tests give a made-up one).
    pub fn at(device: PathBuf) -> AmdSysfs {
        AmdSysfs { device }
    }

    fn text(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.device.join(rel)).ok()
    }

    fn hwmon(&self, name: &str) -> Option<f64> {
        let dir = std::fs::read_dir(self.device.join("hwmon")).ok()?;
        let mut dirs: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        dirs.sort();
        dirs.iter()
            .find_map(|d| std::fs::read_to_string(d.join(name)).ok())
            .and_then(|t| t.trim().parse::<f64>().ok())
    }
}

/// The current level of a `pp_dpm_*` file (`1: 1800Mhz *`), in MHz.
pub fn current_level(text: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.trim_end().ends_with('*'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| {
            v.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse()
                .ok()
        })
}

/// The highest level of a `pp_dpm_*` file, in MHz.
pub fn top_level(text: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|v| {
            v.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse::<f64>()
                .ok()
        })
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
}

#[async_trait::async_trait]
impl DeviceReader for AmdSysfs {
    fn source(&self) -> String {
        format!("amdgpu sysfs {}", self.device.display())
    }

    async fn read(&self) -> Result<DeviceReading, String> {
        let sclk = self.text("pp_dpm_sclk").ok_or_else(|| {
            format!(
                "{}/pp_dpm_sclk: not readable (not an amdgpu device?)",
                self.device.display()
            )
        })?;
        let level = self
            .text("power_dpm_force_performance_level")
            .map(|t| t.trim().to_string());
        Ok(DeviceReading {
            sm_clock_mhz: current_level(&sclk),
            max_sm_clock_mhz: top_level(&sclk),
            mem_clock_mhz: self.text("pp_dpm_mclk").as_deref().and_then(current_level),
            temperature_c: self.hwmon("temp1_input").map(|m| m / 1000.0),
            power_w: self
                .hwmon("power1_average")
                .or_else(|| self.hwmon("power1_input"))
                .map(|u| u / 1e6),
            utilization_pct: self
                .text("gpu_busy_percent")
                .and_then(|t| t.trim().parse().ok()),
            pstate: level.map(|l| format!("performance level {l}")),
            slowdowns: Vec::new(),
        })
    }
}
