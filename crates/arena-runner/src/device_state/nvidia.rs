//! NVIDIA: one `nvidia-smi --query-gpu` line per reading.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arena_run::result::DeviceReading;

use super::DeviceReader;

/// The fields read, in order. Drivers before 535 call the last `clocks_throttle_reasons`.
const FIELDS: &str = "clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,pstate,\
                      utilization.gpu";
const REASONS: &str = "clocks_event_reasons.active";
const REASONS_OLD: &str = "clocks_throttle_reasons.active";

/// What holds the clocks down, by bit of the reasons mask (nvidia-smi's documented bits;
/// idle, application clocks, sync boost and display clocks are not slowdowns).
const SLOWDOWNS: [(u64, &str); 5] = [
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
];

pub struct NvidiaSmi {
    index: u32,
    program: PathBuf,
    old_names: AtomicBool,
}

impl NvidiaSmi {
    /// The GPU of `index`; nvidia-smi from the driver's directory where it has one, else the
    /// PATH.
    pub fn new(index: u32, driver_dir: Option<PathBuf>) -> NvidiaSmi {
        let program = driver_dir
            .map(|d| d.join("bin/nvidia-smi"))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("nvidia-smi"));
        NvidiaSmi {
            index,
            program,
            old_names: AtomicBool::new(false),
        }
    }

    async fn query(&self, reasons: &str) -> Result<String, String> {
        let out = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::process::Command::new(&self.program)
                .arg(format!("--query-gpu={FIELDS},{reasons}"))
                .arg("--format=csv,noheader,nounits")
                .arg("-i")
                .arg(self.index.to_string())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .map_err(|_| "nvidia-smi did not answer in 10 s".to_string())?
        .map_err(|e| format!("{}: {e}", self.program.display()))?;
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "nvidia-smi exited {}: {}",
                out.status,
                text.trim().lines().next().unwrap_or("")
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    }
}

#[async_trait::async_trait]
impl DeviceReader for NvidiaSmi {
    fn source(&self) -> String {
        format!("nvidia-smi -i {}", self.index)
    }

    async fn read(&self) -> Result<DeviceReading, String> {
        let line = if self.old_names.load(Ordering::Relaxed) {
            self.query(REASONS_OLD).await?
        } else {
            match self.query(REASONS).await {
                Ok(l) => l,
                Err(e) if e.contains("not a valid field") || e.contains("Invalid") => {
                    self.old_names.store(true, Ordering::Relaxed);
                    self.query(REASONS_OLD).await?
                }
                Err(e) => return Err(e),
            }
        };
        parse_line(&line)
    }
}

fn number(field: &str) -> Option<f64> {
    field.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// One line of `--format=csv,noheader,nounits` for FIELDS and the reasons mask; a field the
/// device does not report (`[N/A]`, `[Not Supported]`) is absent.
pub fn parse_line(text: &str) -> Result<DeviceReading, String> {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if f.len() != 8 {
        return Err(format!("nvidia-smi printed `{line}`, not 8 fields"));
    }
    let mask = u64::from_str_radix(f[7].trim_start_matches("0x"), 16).ok();
    Ok(DeviceReading {
        sm_clock_mhz: number(f[0]),
        mem_clock_mhz: number(f[1]),
        max_sm_clock_mhz: number(f[2]),
        temperature_c: number(f[3]),
        power_w: number(f[4]),
        pstate: (!f[5].starts_with('[')).then(|| f[5].to_string()),
        utilization_pct: number(f[6]),
        slowdowns: SLOWDOWNS
            .iter()
            .filter(|(bit, _)| mask.is_some_and(|m| m & bit != 0))
            .map(|(_, name)| name.to_string())
            .collect(),
    })
}
