//! The accelerator's state around each evaluation, read on the host: its clocks, temperature,
//! power and what holds its clocks down, before the evaluator container starts, every few
//! seconds while it runs, and after. A reading taken only before and after would see an idle
//! device; what moves timings happens under load (a power cap, thermal slowdown, clocks that
//! wander), so the samples are summarized with warnings where that happened.
//!
//! NVIDIA: `nvidia-smi --query-gpu` for the device's index. AMD: the amdgpu driver's sysfs
//! files of the leased render node (`pp_dpm_sclk`, `pp_dpm_mclk`, hwmon's temperature and
//! power), the stable interface rocm-smi itself reads. Neither present: nothing recorded.

mod amd;
pub(crate) mod nvidia;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use arena_run::result::{DeviceReading, DeviceWindow};
use arena_runtime::GpuProfile;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::gpus::Gpu;

pub use amd::AmdSysfs;
pub use nvidia::NvidiaSmi;

/// How often the device is read while an evaluation runs.
pub const EVERY: Duration = Duration::from_secs(2);
/// A busy device's SM clock may move this much (relative) before it is worth a warning.
pub const CLOCK_SPREAD: f64 = 0.05;
/// A reading counts as busy from this utilization on (where the source reports one).
const BUSY_PCT: f64 = 50.0;

/// One way of reading a device's state.
#[async_trait::async_trait]
pub trait DeviceReader: Send + Sync {
    fn source(&self) -> String;
    async fn read(&self) -> Result<DeviceReading, String>;
}

/// The reader for a leased GPU, if its kind has one.
pub fn reader_for(gpu: &Gpu) -> Option<Arc<dyn DeviceReader>> {
    match &gpu.profile {
        GpuProfile::Nvidia {
            index, driver_dir, ..
        } => Some(Arc::new(NvidiaSmi::new(*index, driver_dir.clone()))),
        GpuProfile::Amd { dri_nodes, .. } => {
            let render = dri_nodes
                .iter()
                .find_map(|p| p.file_name()?.to_str().filter(|n| n.starts_with("renderD")))?;
            Some(Arc::new(AmdSysfs::for_node(render)))
        }
        _ => None,
    }
}

/// A device being watched: its samples so far, collected until [`Watch::finish`].
pub struct Watch {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Vec<Result<DeviceReading, String>>>,
    source: String,
}

/// Reads the device now, then every `every` until finished (the last reading is taken when
/// finishing).
pub fn watch(reader: Arc<dyn DeviceReader>, every: Duration) -> Watch {
    let (stop, mut stopped) = oneshot::channel();
    let source = reader.source();
    let task = tokio::spawn(async move {
        let mut samples = vec![reader.read().await];
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(every) => samples.push(reader.read().await),
            }
        }
        samples.push(reader.read().await);
        samples
    });
    Watch { stop, task, source }
}

impl Watch {
    pub async fn finish(self) -> DeviceWindow {
        let _ = self.stop.send(());
        let samples = self.task.await.unwrap_or_default();
        summarize(&self.source, &samples)
    }
}

fn minmax(xs: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    xs.fold(None, |acc, x| match acc {
        None => Some((x, x)),
        Some((lo, hi)) => Some((lo.min(x), hi.max(x))),
    })
}

/// The window's summary and warnings from its readings, in order.
pub fn summarize(source: &str, samples: &[Result<DeviceReading, String>]) -> DeviceWindow {
    let ok: Vec<&DeviceReading> = samples.iter().filter_map(|s| s.as_ref().ok()).collect();
    let mut w = DeviceWindow {
        source: source.to_string(),
        samples: ok.len() as u32,
        ..Default::default()
    };
    if ok.is_empty() {
        w.unavailable = Some(
            samples
                .iter()
                .find_map(|s| s.as_ref().err().cloned())
                .unwrap_or_else(|| "no reading".into()),
        );
        return w;
    }
    w.start = samples.first().and_then(|s| s.as_ref().ok()).cloned();
    w.end = samples.last().and_then(|s| s.as_ref().ok()).cloned();
    // Busy: utilization at or above BUSY_PCT, or (no utilization reported) every reading.
    let busy = ok
        .iter()
        .filter(|r| r.utilization_pct.is_none_or(|u| u >= BUSY_PCT));
    w.busy_sm_clock_mhz = minmax(busy.filter_map(|r| r.sm_clock_mhz));
    w.max_temperature_c = minmax(ok.iter().filter_map(|r| r.temperature_c)).map(|m| m.1);
    w.max_power_w = minmax(ok.iter().filter_map(|r| r.power_w)).map(|m| m.1);
    let mut slow: Vec<String> = ok
        .iter()
        .flat_map(|r| r.slowdowns.iter().cloned())
        .collect();
    slow.sort();
    slow.dedup();
    if !slow.is_empty() {
        w.warnings.push(format!(
            "the device held its clocks down while the evaluation ran: {}",
            slow.join(", ")
        ));
    }
    w.slowdowns = slow;
    if let Some((lo, hi)) = w.busy_sm_clock_mhz {
        if hi > 0.0 && (hi - lo) / hi > CLOCK_SPREAD {
            w.warnings.push(format!(
                "the SM clock moved from {lo:.0} to {hi:.0} MHz while the device was busy: \
                 timings taken at different clocks (lock them, or read the intervals)"
            ));
        }
    }
    let errors = samples.len() - ok.len();
    if errors > 0 {
        w.warnings
            .push(format!("{errors} of {} readings failed", samples.len()));
    }
    w
}
