//! How busy each GPU was over a run: from each task run's wall-clock start, its
//! length and its GPU. A GPU counts as busy while a task run holds it, less the time that
//! task run spent on its images (the engine has them imported before a task run takes a
//! GPU, so that part is only their check); the run's span runs from the first task run's
//! start to the last one's end. A resumed run's span covers the pause between its
//! attempts, which reads as idle: it was.

use serde::Serialize;

use arena_run::result::TaskResult;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuBusy {
    pub gpu: u32,
    pub task_runs: usize,
    /// Seconds task runs held this GPU.
    pub held_s: f64,
    /// Of those, seconds spent on images.
    pub image_s: f64,
    /// (held − image) over the run's span.
    pub busy: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Busy {
    /// Seconds from the first task run's start to the last one's end.
    pub span_s: f64,
    pub gpus: Vec<GpuBusy>,
}

impl Busy {
    /// The GPUs' busy shares, where task runs that held a GPU (not the CPU's `none` slot)
    /// say when they began; None where none does (results written before they said).
    pub fn of(results: &[TaskResult]) -> Option<Busy> {
        let runs: Vec<(u32, f64, f64, f64)> = results
            .iter()
            .filter_map(|r| {
                let gpu = r.gpu.as_ref().filter(|g| g.is_device())?;
                let t = r.timings.as_ref()?;
                Some((
                    gpu.index,
                    t.started_unix_s?,
                    t.total_s,
                    t.image_s.unwrap_or(0.0),
                ))
            })
            .collect();
        let first = runs.iter().map(|r| r.1).reduce(f64::min)?;
        let last = runs.iter().map(|r| r.1 + r.2).reduce(f64::max)?;
        let span_s = last - first;
        if span_s <= 0.0 {
            return None;
        }
        let mut indices: Vec<u32> = runs.iter().map(|r| r.0).collect();
        indices.sort_unstable();
        indices.dedup();
        let gpus = indices
            .into_iter()
            .map(|gpu| {
                let mine: Vec<_> = runs.iter().filter(|r| r.0 == gpu).collect();
                let held_s: f64 = mine.iter().map(|r| r.2).sum();
                let image_s: f64 = mine.iter().map(|r| r.3).sum();
                GpuBusy {
                    gpu,
                    task_runs: mine.len(),
                    held_s,
                    image_s,
                    busy: (held_s - image_s) / span_s,
                }
            })
            .collect();
        Some(Busy { span_s, gpus })
    }

    /// One line: every GPU's share, the least busy first.
    pub fn line(&self) -> String {
        let mut gpus: Vec<&GpuBusy> = self.gpus.iter().collect();
        gpus.sort_by(|a, b| a.busy.total_cmp(&b.busy).then(a.gpu.cmp(&b.gpu)));
        let each: Vec<String> = gpus
            .iter()
            .map(|g| {
                format!(
                    "GPU {} {:.1} % ({} task runs, {:.0} s held, {:.0} s of it on images)",
                    g.gpu,
                    100.0 * g.busy,
                    g.task_runs,
                    g.held_s,
                    g.image_s
                )
            })
            .collect();
        format!(
            "GPUs busy over the {:.0} s from the first task run's start to the last one's end: {}.",
            self.span_s,
            each.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arena_run::result::{GpuRecord, Timings};

    fn run(gpu: u32, kind: &str, start: Option<f64>, total: f64, image: f64) -> TaskResult {
        let spec = crate::fixture::Spec {
            task_id: "triton2triton/t/a".into(),
            task_type: "triton2triton".into(),
            repeat: 0,
            speedup: Some(1.0),
            noise: 0.0,
            unseen: false,
        };
        let mut r = crate::fixture::result(&spec, 1);
        r.gpu = Some(GpuRecord {
            index: gpu,
            kind: kind.into(),
        });
        r.timings = Some(Timings {
            total_s: total,
            started_unix_s: start,
            image_s: Some(image),
            ..Timings::default()
        });
        r
    }

    #[test]
    fn each_gpu_is_busy_while_held_past_its_images_over_the_runs_span() {
        let b = Busy::of(&[
            run(0, "nvidia", Some(1000.0), 50.0, 10.0),
            run(0, "nvidia", Some(1050.0), 50.0, 0.0),
            run(1, "nvidia", Some(1000.0), 40.0, 0.0),
            run(1, "nvidia", Some(1045.0), 30.0, 0.0),
            // The CPU's slot and a result without a start are not counted.
            run(0, "none", Some(0.0), 5000.0, 0.0),
            run(1, "nvidia", None, 1000.0, 0.0),
        ])
        .unwrap();
        assert_eq!(b.span_s, 100.0);
        assert_eq!(b.gpus.len(), 2);
        assert_eq!((b.gpus[0].gpu, b.gpus[0].task_runs), (0, 2));
        assert!((b.gpus[0].busy - 0.9).abs() < 1e-12, "{b:?}");
        assert!((b.gpus[1].busy - 0.7).abs() < 1e-12, "{b:?}");
        let line = b.line();
        assert!(line.starts_with("GPUs busy over the 100 s"), "{line}");
        assert!(
            line.find("GPU 1 70.0 %").unwrap() < line.find("GPU 0 90.0 %").unwrap(),
            "the least busy first: {line}"
        );
    }

    #[test]
    fn nothing_is_said_without_starts() {
        assert_eq!(Busy::of(&[run(0, "nvidia", None, 10.0, 0.0)]), None);
        assert_eq!(Busy::of(&[run(0, "none", Some(1.0), 10.0, 0.0)]), None);
        assert_eq!(Busy::of(&[]), None);
    }
}
