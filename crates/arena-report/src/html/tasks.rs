//! The task-run table of the HTML report: one row per task run, and in its details the cases
//! of each shape (visible shapes with their parameters; unseen configurations by index only),
//! every digest the result depends on, and links to the containers' logs.

use std::fmt::Write;

use arena_eval::record::PerfCase;

use super::{attr, esc, num, PageInfo};
use crate::generalization::task_generalization;
use crate::score::paired_baseline;
use crate::{Report, TaskResult};

/// `visible`: the cases of the task's own shapes, whose parameters may be shown; unseen
/// configurations are named by index only, whatever a harness put into their records.
/// Cases timed in simulated cycles show the cycles, not their nominal milliseconds.
fn cases_table(title: &str, base: &[PerfCase], cand: &[PerfCase], visible: bool) -> String {
    if cand.is_empty() && base.is_empty() {
        return String::new();
    }
    let simulated = !cand.is_empty() && cand.iter().all(|c| c.pairing.cycles.is_some());
    let unit = if simulated { "cycles" } else { "ms" };
    let mut out = format!(
        "<table class=\"cases\"><caption>{}</caption><tr><th>case</th><th>shape</th>\
         <th>original {unit}</th><th>candidate {unit}</th><th>ratio</th><th>95% interval</th>\
         <th>pairs</th></tr>",
        esc(title)
    );
    for c in cand {
        let b = paired_baseline(c).or_else(|| {
            base.iter()
                .find(|b| b.test_case_id == c.test_case_id)
                .map(|b| b.execution_time_ms)
        });
        let shape = c
            .extra
            .get("params")
            .map(|p| p.get("shape").unwrap_or(p))
            .filter(|_| visible)
            .map(|s| s.to_string())
            .unwrap_or_default();
        // Paired cases: the median ratio over the pairs, and its bootstrap interval.
        let pairs = crate::stats::pairs(c).filter(|_| c.measured());
        let ratio = match &pairs {
            Some(p) => Some(crate::stats::pair_ratio(p)),
            None => b.filter(|_| c.measured()).map(|b| b / c.execution_time_ms),
        };
        let interval = pairs
            .as_ref()
            .and_then(|_| crate::stats::speedup_interval(std::slice::from_ref(c)))
            .map(|(lo, hi)| format!("{lo:.3}–{hi:.3}"))
            .unwrap_or_default();
        let (original, candidate) = if simulated {
            (
                num(
                    "original_cycles",
                    c.pairing.baseline_cycles.map(|n| n as f64),
                    0,
                ),
                num("candidate_cycles", c.pairing.cycles.map(|n| n as f64), 0),
            )
        } else {
            (
                num("original_ms", b, 4),
                num("candidate_ms", Some(c.execution_time_ms), 4),
            )
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td>{}{}{}<td>{}</td>{}</tr>",
            esc(&c.test_case_id),
            esc(&shape),
            original,
            candidate,
            num("ratio", ratio, 3),
            interval,
            num("pairs", pairs.as_ref().map(|p| p.len() as f64), 0),
        );
    }
    out.push_str("</table>");
    out
}

fn digests(r: &TaskResult) -> String {
    let Some(p) = &r.provenance else {
        return "<p class=\"muted\">no provenance recorded</p>".into();
    };
    let mut rows = vec![
        ("task", Some(p.task.to_string())),
        ("harness", Some(p.harness.to_string())),
        ("image", Some(p.image.to_string())),
        ("agent image", p.agent_image.as_ref().map(|d| d.to_string())),
        ("agent", p.agent.as_ref().map(|d| d.to_string())),
        ("candidate", p.candidate.as_ref().map(|d| d.to_string())),
        ("lockfile", Some(p.lockfile.to_string())),
        ("evaluator", p.evaluator.as_ref().map(|d| d.to_string())),
        ("unseen set", p.unseen_set.as_ref().map(|d| d.to_string())),
    ];
    rows.retain(|(_, v)| v.is_some());
    let mut out = format!(
        "<table class=\"digests\"><caption>depends on (arena {})</caption>",
        esc(&p.arena_version)
    );
    for (k, v) in rows {
        let _ = write!(
            out,
            "<tr><td>{k}</td><td><code>{}</code></td></tr>",
            esc(&v.unwrap_or_default())
        );
    }
    out.push_str("</table>");
    out
}

fn logs(r: &TaskResult, info: &PageInfo) -> String {
    let mut links = Vec::new();
    for (phase, c) in &r.containers {
        for (stream, path) in [("out", &c.stdout), ("err", &c.stderr)] {
            if let Some(p) = path {
                links.push(format!(
                    "<a href=\"{}\">{}:{stream}</a>",
                    attr(&format!("{}{p}", info.link_base)),
                    esc(phase)
                ));
            }
        }
    }
    links.join(" ")
}

/// `results` sorted as `report.tasks` is (by task and repeat; the report refuses duplicates),
/// so that the n-th result is the n-th score.
pub(super) fn table(report: &Report, results: &[&TaskResult], info: &PageInfo) -> String {
    let mut out = String::from(
        "<table id=\"tasks\"><thead><tr><th>task</th><th>type</th><th>repeat</th><th>trust</th>\
         <th>compiled</th><th>correct</th><th>speedup</th><th>95% interval</th>\
         <th>one sample (AKA)</th><th>vs torch.compile</th><th>score</th>\
         <th>why not scored higher</th><th>unseen quadrant</th><th>unseen speedup</th>\
         <th>logs</th><th>details</th></tr></thead><tbody>",
    );
    for (r, s) in results.iter().zip(&report.tasks) {
        debug_assert_eq!(
            (r.task_id.as_str(), r.repeat),
            (s.task_id.as_str(), s.repeat)
        );
        let g = task_generalization(r);
        let reason = r
            .candidate_refused
            .clone()
            .or_else(|| r.candidate.failed_gate())
            .or_else(|| s.performance_failure.as_ref().map(|f| f.to_string()))
            .unwrap_or_default();
        let interval = s
            .speedup_interval
            .map(|(lo, hi)| format!("{lo:.3}–{hi:.3}"))
            .unwrap_or_default();
        let mut details = cases_table(
            "visible shapes",
            &r.baseline.performance,
            &r.candidate.performance,
            true,
        );
        for note in &s.autotune_varied {
            let _ = write!(details, "<p>autotuning: {}</p>", esc(note));
        }
        if let Some(u) = &r.unseen {
            details.push_str(&cases_table(
                "unseen configurations (by index)",
                &u.original.performance,
                &u.optimized.performance,
                false,
            ));
            if let Some(why) = u.optimized.failed_gate() {
                let _ = write!(details, "<p>unseen: {}</p>", esc(&why));
            }
            let cats: Vec<String> = u
                .failures_by_category
                .iter()
                .map(|(c, n)| format!("{c}: {n}"))
                .collect();
            if !cats.is_empty() {
                let _ = write!(
                    details,
                    "<p>unseen failures by category: {}</p>",
                    esc(&cats.join(", "))
                );
            }
        }
        details.push_str(&digests(r));
        let _ = write!(
            out,
            "<tr class=\"{}\" data-task=\"{}\"><td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td><td>{}</td>\
             {}<td>{}</td>{}{}{}<td>{}</td><td>{}</td>{}<td>{}</td>\
             <td><details><summary>cases, digests</summary>{}</details></td></tr>",
            if s.correct { "pass" } else { "fail" },
            attr(r.task_id.as_str()),
            esc(r.task_id.as_str()),
            esc(&r.task_type),
            num("repeat", Some(r.repeat as f64), 0),
            esc(r.trust.label()),
            if s.compiled { "yes" } else { "no" },
            if s.correct { "yes" } else { "no" },
            num("speedup", Some(s.speedup), 3),
            interval,
            num("unpaired_speedup", s.unpaired_speedup, 3),
            num("compiled_speedup", s.compiled_speedup, 3),
            num("score", Some(s.score), 1),
            esc(&reason),
            g.as_ref().map(|g| g.quadrant.as_str()).unwrap_or(""),
            num("unseen_speedup", g.as_ref().and_then(|g| g.unseen_speedup), 3),
            logs(r, info),
            details
        );
    }
    out.push_str("</tbody></table>");
    out
}
