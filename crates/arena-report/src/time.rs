//! Where a run's time went: every task run's phases (image, baseline evaluation,
//! workspace, agent, candidate evaluation, unseen evaluations) and, across them, what the
//! time was spent on (containers, the gates, the evaluators' set-up, arena's own work), summed
//! over the results, with the device-hours of task runs that held a GPU slot.

use serde::Serialize;

use arena_eval::evaluator_record::PERFORMANCE_PARTS;
use arena_run::result::TaskResult;

/// One line of the summary: seconds summed over the task runs that had it, and their share
/// of every task run's total.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spent {
    pub what: &'static str,
    pub seconds: f64,
    pub share: f64,
}

/// The run's time, summed over its task runs' results (those without timings are counted in
/// `untimed`, a result written before timings were recorded).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeSummary {
    pub task_runs: usize,
    pub untimed: usize,
    pub total_s: f64,
    /// Hours of task runs that held a GPU slot (every slot but `none`, the CPU's).
    pub device_hours: f64,
    /// The task run's phases, in the order they run.
    pub phases: Vec<Spent>,
    /// What the time went on, across phases (the results' `breakdown`).
    pub spent_on: Vec<Spent>,
    /// The trusted evaluators' performance gates by part (the breakdowns'
    /// `performance_parts_s`), then `timed kernel work`: what their timed batches read, inside
    /// `window`. Empty where no task run had a trusted performance gate.
    pub performance_parts: Vec<Spent>,
    /// The longest task runs: (task, repeat, seconds), longest first, at most five.
    pub longest: Vec<(String, u32, f64)>,
    /// How busy each GPU was over the run (crate::busy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy: Option<crate::busy::Busy>,
}

impl TimeSummary {
    pub fn of(results: &[TaskResult]) -> TimeSummary {
        let timed: Vec<_> = results
            .iter()
            .filter_map(|r| r.timings.as_ref().map(|t| (r, t)))
            .collect();
        // Folds from +0.0: `sum` of no f64 is -0.0, which prints as "-0.0".
        let total_s: f64 = timed.iter().map(|(_, t)| t.total_s).fold(0.0, |a, b| a + b);
        let share = |s: f64| if total_s > 0.0 { s / total_s } else { 0.0 };
        let sum = |f: &dyn Fn(&arena_run::result::Timings) -> Option<f64>| -> f64 {
            timed
                .iter()
                .filter_map(|(_, t)| f(t))
                .fold(0.0, |a, b| a + b)
        };
        let line = |what, seconds| Spent {
            what,
            seconds,
            share: share(seconds),
        };
        let phases = vec![
            line("image", sum(&|t| t.image_s)),
            line("baseline", sum(&|t| t.baseline_s)),
            line("workspace", sum(&|t| t.workspace_s)),
            line("agent", sum(&|t| t.agent_s)),
            line("candidate", sum(&|t| t.candidate_s)),
            line("unseen", sum(&|t| t.unseen_s)),
        ];
        let b = |f: &dyn Fn(&arena_run::result::Breakdown) -> f64| {
            sum(&|t| t.breakdown.as_ref().map(f))
        };
        let spent_on = vec![
            line("image", b(&|b| b.image_s)),
            line("containers", b(&|b| b.containers_s)),
            line("agent", b(&|b| b.agent_s)),
            line("compile", b(&|b| b.compile_s)),
            line("correctness", b(&|b| b.correctness_s)),
            line("performance", b(&|b| b.performance_s)),
            line("evaluator set-up", b(&|b| b.evaluator_setup_s)),
            line("other", b(&|b| b.other_s)),
        ];
        let mut performance_parts: Vec<Spent> = PERFORMANCE_PARTS
            .iter()
            .map(|&p| {
                line(
                    p,
                    b(&|b| b.performance_parts_s.get(p).copied().unwrap_or(0.0)),
                )
            })
            .collect();
        let measured = sum(&|t| t.breakdown.as_ref().and_then(|b| b.performance_measured_s));
        if performance_parts.iter().all(|s| s.seconds <= 0.0) {
            performance_parts.clear();
        } else {
            performance_parts.push(line("timed kernel work (in window)", measured));
        }
        let device_s: f64 = timed
            .iter()
            .filter(|(r, _)| r.gpu.as_ref().is_some_and(|g| g.is_device()))
            .map(|(_, t)| t.total_s)
            .fold(0.0, |a, b| a + b);
        let mut longest: Vec<(String, u32, f64)> = timed
            .iter()
            .map(|(r, t)| (r.task_id.to_string(), r.repeat, t.total_s))
            .collect();
        longest.sort_by(|a, b| {
            b.2.total_cmp(&a.2)
                .then_with(|| (&a.0, a.1).cmp(&(&b.0, b.1)))
        });
        longest.truncate(5);
        TimeSummary {
            task_runs: results.len(),
            untimed: results.len() - timed.len(),
            total_s,
            device_hours: device_s / 3600.0,
            phases,
            spent_on,
            performance_parts,
            longest,
            busy: crate::busy::Busy::of(results),
        }
    }

    /// The summary as markdown: two tables and the longest task runs.
    pub fn markdown(&self) -> String {
        if self.total_s <= 0.0 {
            return String::new();
        }
        let mut out = format!(
            "\nWhere the time went: {} task runs, {:.1} min in all, {:.2} device-hours{}:\n\n",
            self.task_runs,
            self.total_s / 60.0,
            self.device_hours,
            if self.untimed > 0 {
                format!(" ({} without timings)", self.untimed)
            } else {
                String::new()
            }
        );
        for (head, lines) in [
            ("phase", &self.phases),
            ("spent on", &self.spent_on),
            ("trusted performance, by part", &self.performance_parts),
        ] {
            if lines.is_empty() {
                continue;
            }
            out.push_str(&format!("| {head} | s | % |\n|---|---:|---:|\n"));
            for s in lines.iter().filter(|s| s.seconds > 0.0) {
                out.push_str(&format!(
                    "| {} | {:.1} | {:.1} |\n",
                    s.what,
                    s.seconds,
                    100.0 * s.share
                ));
            }
            out.push('\n');
        }
        let longest: Vec<String> = self
            .longest
            .iter()
            .map(|(t, r, s)| format!("`{t}` #{r} {s:.1} s"))
            .collect();
        out.push_str(&format!("Longest task runs: {}.\n", longest.join(", ")));
        if let Some(b) = &self.busy {
            out.push_str(&format!("\n{}\n", b.line()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arena_run::result::{Breakdown, GpuRecord, Timings};

    fn result(task: &str, repeat: u32, total: f64, gpu: &str) -> TaskResult {
        let spec = crate::fixture::Spec {
            task_id: format!("triton2triton/t/{task}"),
            task_type: "triton2triton".into(),
            repeat,
            speedup: Some(1.0),
            noise: 0.0,
            unseen: false,
        };
        let mut r = crate::fixture::result(&spec, 1);
        r.gpu = Some(GpuRecord {
            index: 0,
            kind: gpu.into(),
        });
        r.timings = Some(Timings {
            total_s: total,
            image_s: Some(1.0),
            baseline_s: Some(total / 2.0 - 1.0),
            agent_s: Some(total / 4.0),
            candidate_s: Some(total / 4.0),
            breakdown: Some(Breakdown {
                performance_s: total / 2.0,
                other_s: total / 2.0,
                ..Breakdown::default()
            }),
            ..Timings::default()
        });
        r
    }

    #[test]
    fn phases_are_summed_over_task_runs_and_shared_of_their_total() {
        let mut untimed = result("c", 0, 1.0, "none");
        untimed.timings = None;
        let s = TimeSummary::of(&[
            result("a", 0, 40.0, "nvidia"),
            result("b", 1, 80.0, "none"),
            untimed,
        ]);
        assert_eq!((s.task_runs, s.untimed), (3, 1));
        assert_eq!(s.total_s, 120.0);
        assert!(
            (s.device_hours - 40.0 / 3600.0).abs() < 1e-12,
            "only the GPU's"
        );
        let phase = |w: &str| s.phases.iter().find(|p| p.what == w).unwrap().clone();
        assert_eq!(phase("image").seconds, 2.0);
        assert_eq!(phase("baseline").seconds, 58.0);
        assert_eq!(phase("agent").seconds, 30.0);
        assert!((phase("agent").share - 0.25).abs() < 1e-12);
        assert_eq!(phase("unseen").seconds, 0.0);
        let on = |w: &str| s.spent_on.iter().find(|p| p.what == w).unwrap().seconds;
        assert_eq!(on("performance"), 60.0);
        assert_eq!(on("other"), 60.0);
        assert_eq!(s.longest[0], ("triton2triton/t/b".to_string(), 1, 80.0));
        let md = s.markdown();
        assert!(
            md.contains("3 task runs, 2.0 min in all, 0.01 device-hours (1 without timings)"),
            "{md}"
        );
        assert!(md.contains("| baseline | 58.0 | 48.3 |"), "{md}");
        assert!(!md.contains("| unseen |"), "{md}");
    }

    /// A trusted performance gate's parts are summed over the task runs that have them, with
    /// what the timed batches read; runs without (a harness's own commands) add nothing, and a
    /// run where none has them gets no such table.
    #[test]
    fn trusted_performance_parts_are_summed_with_the_timed_work() {
        let mut a = result("a", 0, 40.0, "nvidia");
        let mut b = result("b", 0, 40.0, "nvidia");
        for (r, window, measured) in [(&mut a, 6.0, 0.5), (&mut b, 2.0, 0.25)] {
            let bd = r.timings.as_mut().unwrap().breakdown.as_mut().unwrap();
            bd.performance_parts_s =
                [("window".to_string(), window), ("inputs".to_string(), 4.0)].into();
            bd.performance_measured_s = Some(measured);
        }
        let s = TimeSummary::of(&[a, b, result("c", 0, 20.0, "none")]);
        let part = |w: &str| {
            s.performance_parts
                .iter()
                .find(|p| p.what == w)
                .unwrap()
                .clone()
        };
        assert_eq!(s.performance_parts.len(), PERFORMANCE_PARTS.len() + 1);
        assert_eq!(part("window").seconds, 8.0);
        assert!((part("window").share - 0.08).abs() < 1e-12);
        assert_eq!(part("inputs").seconds, 8.0);
        assert_eq!(part("sessions").seconds, 0.0);
        assert_eq!(part("timed kernel work (in window)").seconds, 0.75);
        let md = s.markdown();
        assert!(
            md.contains("| trusted performance, by part | s | % |"),
            "{md}"
        );
        assert!(md.contains("| window | 8.0 | 8.0 |"), "{md}");
        assert!(!md.contains("| sessions |"), "{md}");

        let none = TimeSummary::of(&[result("c", 0, 20.0, "none")]);
        assert!(none.performance_parts.is_empty());
        assert!(!none.markdown().contains("by part"), "{}", none.markdown());
    }

    #[test]
    fn no_timings_is_no_table() {
        let mut r = result("a", 0, 1.0, "none");
        r.timings = None;
        let s = TimeSummary::of(&[r]);
        assert_eq!(s.total_s, 0.0);
        assert!(s.markdown().is_empty());
    }
}
