//! arena-report: scores and aggregates of benchmark results, as the AgentKernelArena paper
//! defines them, and their tables.
//!
//! Input is the task result record ([`arena_run::result::TaskResult`]); [`Report::build`] scores every
//! task, aggregates per task type and summarizes generalization to unseen configurations.

pub mod aggregate;
pub mod busy;
pub mod compare;
pub mod error;
pub mod fixture;
pub mod generalization;
pub mod html;
pub mod noise;
pub mod plots;
pub mod score;
pub mod stats;
pub mod table;
pub mod time;

use serde::Serialize;

pub use aggregate::{aggregate_by_type, Aggregate, ALL};
pub use arena_eval::record::{Evaluation, GateReport, GateStatus, PerfCase};
pub use arena_run::result::{
    load_result_file, load_results, InfraError, ResultSet, TaskResult, Trust, UnseenResult,
};
pub use error::ReportError;
pub use generalization::{summarize_by_type, GeneralizationSummary, Quadrant, TaskGeneralization};
pub use score::{score, score_task, speedup, PerfFailure, TaskScore};

/// Why a task run has no result, as the reports say it: its reason's last line (a traceback's
/// exception), at most 300 characters.
pub fn why_unscored(u: &arena_run::result::InfraError) -> String {
    let last = u.reason.lines().last().unwrap_or("").trim();
    last.chars().take(300).collect()
}

/// Everything `arenactl score` prints: per-task scores, the aggregate table and, where the
/// results carry unseen-configuration evaluations, the generalization table.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub tasks: Vec<TaskScore>,
    pub aggregates: Vec<Aggregate>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub generalization: Vec<GeneralizationSummary>,
    /// fast_p counted on the lower bounds of bootstrap intervals ([`noise`]).
    pub noise_aware: Vec<noise::NoiseAware>,
    /// Where the run's time went ([`time`]).
    pub time: time::TimeSummary,
    /// Task runs that ended without a result (the evaluation or the engine failed), which no
    /// number above counts ([`Report::with_unscored`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unscored: Vec<arena_run::result::InfraError>,
    /// Where the tables hold only trusted task runs (`--trusted-only`): how many of the
    /// results' task runs were left out for having been measured another way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted_only: Option<TrustedOnly>,
}

/// What `--trusted-only` left out of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrustedOnly {
    /// Task runs in the results.
    pub runs: usize,
    /// Of those, the ones not measured by the trusted evaluator (left out of every table).
    pub left_out: usize,
}

impl Report {
    pub fn build(results: &[TaskResult]) -> Result<Report, ReportError> {
        // Bootstrap draws are the costly part: made once per run, for the run's interval and
        // for the noise-aware summary.
        let runs: Vec<noise::RunDraws> = results.iter().map(noise::RunDraws::of).collect();
        let mut tasks: Vec<TaskScore> = results
            .iter()
            .zip(&runs)
            .map(|(r, d)| {
                let mut s = score_task(r);
                s.speedup_interval = d.interval();
                s
            })
            .collect();
        tasks.sort_by(|a, b| (&a.task_id, a.repeat).cmp(&(&b.task_id, b.repeat)));
        let aggregates = aggregate_by_type(&tasks)?;
        Ok(Report {
            tasks,
            aggregates,
            generalization: summarize_by_type(results),
            noise_aware: noise::summarize_runs(&runs),
            time: time::TimeSummary::of(results),
            unscored: Vec::new(),
            trusted_only: None,
        })
    }

    /// The report over the trusted task runs of `results` alone (`--trusted-only`): no row of
    /// its tables holds a number the kernel's own process timed.
    pub fn build_trusted_only(results: &[TaskResult]) -> Result<Report, ReportError> {
        let kept: Vec<TaskResult> = results
            .iter()
            .filter(|r| r.trust == Trust::Trusted)
            .cloned()
            .collect();
        let mut report = Report::build(&kept)?;
        report.trusted_only = Some(TrustedOnly {
            runs: results.len(),
            left_out: results.len() - kept.len(),
        });
        Ok(report)
    }

    /// The report with the task runs of its result sets that have no result. They are said
    /// beside the table, never dropped in silence: a kernel that makes its own evaluation
    /// fail would otherwise leave the numbers better than they are.
    pub fn with_unscored(mut self, mut unscored: Vec<arena_run::result::InfraError>) -> Report {
        unscored.sort_by(|a, b| (&a.task_id, a.repeat).cmp(&(&b.task_id, b.repeat)));
        self.unscored = unscored;
        self
    }

    /// The unscored task runs, one line each with the reason ("" where there are none).
    pub fn unscored_markdown(&self) -> String {
        if self.unscored.is_empty() {
            return String::new();
        }
        let lines: Vec<String> = self
            .unscored
            .iter()
            .map(|u| {
                format!(
                    "- `{}` (repeat {}): {}\n",
                    u.task_id,
                    u.repeat,
                    why_unscored(u)
                )
            })
            .collect();
        format!(
            "\n**{} task run(s) without a result, counted in no number above** (the same \
             command runs them again):\n\n{}",
            self.unscored.len(),
            lines.concat()
        )
    }

    pub fn markdown(&self) -> String {
        let mut out = self.trusted_only_line();
        out.push_str(&table::aggregates_markdown(&self.aggregates));
        out.push_str(&self.measured_line());
        out.push_str(&self.unscored_markdown());
        out.push_str(
            "\nfast_p as KernelBench counts it (% of task runs correct and faster than p×):\n\n",
        );
        out.push_str(&table::fast_p_markdown(&self.aggregates));
        let compiled = table::compiled_markdown(&self.aggregates);
        if !compiled.is_empty() {
            out.push_str(
                "\nAgainst the original compiled by torch.compile (timed in the same pairs; fast_p \
                 as above, a run without that speedup counted as not faster):\n\n",
            );
            out.push_str(&compiled);
        }
        if self.noise_aware.iter().any(|n| n.with_interval > 0) {
            out.push_str("\nNoise-aware (95% bootstrap intervals of the paired samples):\n\n");
            out.push_str(&noise::markdown(&self.noise_aware));
        }
        out.push_str(&self.autotune_notes());
        if !self.generalization.is_empty() {
            out.push_str("\nGeneralization to unseen configurations:\n\n");
            out.push_str(&table::generalization_markdown(&self.generalization));
        }
        out.push_str(&self.time.markdown());
        out
    }

    /// The task runs whose autotuned kernels chose differently from run to run, one line each.
    pub fn autotune_notes(&self) -> String {
        let lines: Vec<String> = self
            .tasks
            .iter()
            .flat_map(|t| {
                t.autotune_varied
                    .iter()
                    .map(move |n| format!("- `{}` (repeat {}): {n}\n", t.task_id, t.repeat))
            })
            .collect();
        if lines.is_empty() {
            return String::new();
        }
        format!(
            "\nAutotuned kernels whose configuration varied between performance runs (their \
             rounds spread with the choice, not only with the kernel):\n\n{}",
            lines.concat()
        )
    }

    /// Said above the tables of a `--trusted-only` report ("" for another).
    pub fn trusted_only_line(&self) -> String {
        match self.trusted_only {
            Some(t) => format!(
                "Trusted task runs only: {} of {} task runs measured otherwise (self-reported) are left out of every table.\n\n",
                t.left_out, t.runs
            ),
            None => String::new(),
        }
    }

    /// "Measured: 3 trusted, 1 self-reported, cross-checked" — how the table's numbers were
    /// measured, so that no one reads a self-reported speedup as a trusted one.
    pub fn measured_line(&self) -> String {
        let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
        for t in &self.tasks {
            *counts.entry(t.trust.label()).or_default() += 1;
        }
        if counts.is_empty() {
            return String::new();
        }
        let parts: Vec<String> = counts.iter().map(|(l, n)| format!("{n} {l}")).collect();
        let mut line = format!("\nMeasured: {} (task runs).\n", parts.join("; "));
        if self.tasks.iter().any(|t| t.trust.self_reported()) {
            line.push_str(SELF_REPORTED_CAVEAT);
        }
        line
    }
}

/// Said under every table that holds a self-reported result, cross-checked or not: the
/// cross-check catches clocks that lie by much, not a kernel that ends its own timing early.
pub const SELF_REPORTED_CAVEAT: &str = "Self-reported results (cross-checked too) were timed by \
the task's own harness in the kernel's process: a kernel that makes `torch.cuda.synchronize` a \
no-op there reads several times faster with every gate passing, which the cross-check does not \
always see (docs/trusted-evaluation.md, \"Self-reported tasks\"). Read them as what the kernel \
says of itself.\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, trust: Trust) -> TaskScore {
        TaskScore {
            task_id: id.into(),
            task_type: "t".into(),
            repeat: 0,
            compiled: true,
            correct: true,
            speedup: 1.0,
            score: 220.0,
            performance_failure: None,
            trust,
            speedup_interval: None,
            unpaired_speedup: None,
            compiled_speedup: None,
            vs_compiled: false,
            autotune_varied: vec![],
        }
    }

    #[test]
    fn the_table_says_how_its_numbers_were_measured() {
        let r = Report {
            tasks: vec![
                task("a", Trust::Trusted),
                task("b", Trust::SelfReportedCrossChecked),
                task("c", Trust::Trusted),
            ],
            aggregates: vec![],
            generalization: vec![],
            noise_aware: vec![],
            time: time::TimeSummary::of(&[]),
            unscored: Vec::new(),
            trusted_only: None,
        };
        assert_eq!(
            r.measured_line(),
            format!(
                "\nMeasured: 1 self-reported, cross-checked; 2 trusted (task runs).\n{SELF_REPORTED_CAVEAT}"
            )
        );
        assert!(r.markdown().contains("2 trusted"));
        assert!(r.markdown().contains("what the kernel says of itself"));
        let trusted_only = Report {
            tasks: vec![task("a", Trust::Trusted)],
            aggregates: vec![],
            generalization: vec![],
            noise_aware: vec![],
            time: time::TimeSummary::of(&[]),
            unscored: Vec::new(),
            trusted_only: None,
        };
        assert_eq!(
            trusted_only.measured_line(),
            "\nMeasured: 1 trusted (task runs).\n"
        );
    }

    #[test]
    fn a_kernel_whose_autotuning_varied_is_named_under_the_tables() {
        let mut a = task("vllm/triton_fla_l2norm", Trust::SelfReportedCrossChecked);
        a.autotune_varied = vec!["the original kernel chose 3 configurations of k".into()];
        let mut r = Report {
            tasks: vec![task("b", Trust::Trusted), a],
            aggregates: vec![],
            generalization: vec![],
            noise_aware: vec![],
            time: time::TimeSummary::of(&[]),
            unscored: Vec::new(),
            trusted_only: None,
        };
        let md = r.markdown();
        assert!(md.contains("varied between performance runs"), "{md}");
        assert!(md.contains(
            "- `vllm/triton_fla_l2norm` (repeat 0): the original kernel chose 3 configurations of k\n"
        ));
        r.tasks.pop();
        assert!(!r.markdown().contains("varied between"));
    }

    #[test]
    fn trusted_share_per_type_and_trusted_only_tables() {
        // Nine runs of three types; every third task's runs self-reported.
        let mut results = fixture::run(9, 1, 1.0, 7).tasks;
        for (i, r) in results.iter_mut().enumerate() {
            if i % 3 == 0 {
                r.trust = Trust::SelfReported;
            }
        }
        let all = Report::build(&results).unwrap();
        let row = |r: &Report, ty: &str| {
            r.aggregates
                .iter()
                .find(|a| a.task_type == ty)
                .cloned()
                .unwrap_or_else(|| panic!("no row {ty}"))
        };
        // types cycle triton2triton, torch2hip, python2python: tasks 0, 3, 6 are triton2triton.
        assert_eq!(row(&all, "triton2triton").trusted_percent, 0.0);
        assert_eq!(row(&all, "torch2hip").trusted_percent, 100.0);
        let overall = row(&all, ALL).trusted_percent;
        assert!((overall - 100.0 * 6.0 / 9.0).abs() < 1e-9, "{overall}");
        let md = all.markdown();
        assert!(md.contains("| trusted % |"), "{md}");
        assert!(!md.contains("Trusted task runs only"), "{md}");
        assert!(table::aggregates_csv(&all.aggregates)
            .lines()
            .next()
            .unwrap()
            .ends_with(",trusted_percent"));

        let only = Report::build_trusted_only(&results).unwrap();
        assert_eq!(
            only.trusted_only,
            Some(TrustedOnly {
                runs: 9,
                left_out: 3
            })
        );
        assert_eq!(only.tasks.len(), 6);
        assert!(only.tasks.iter().all(|t| t.trust == Trust::Trusted));
        assert!(only.aggregates.iter().all(|a| a.trusted_percent == 100.0));
        assert!(!only
            .aggregates
            .iter()
            .any(|a| a.task_type == "triton2triton"));
        let md = only.markdown();
        assert!(
            md.starts_with("Trusted task runs only: 3 of 9 task runs"),
            "{md}"
        );
        assert!(!md.contains(SELF_REPORTED_CAVEAT), "{md}");
        let json = serde_json::to_value(&only).unwrap();
        assert_eq!(json["trusted_only"]["left_out"], 3);
    }
}
