//! `arenactl report --format html`: one self-contained page (inline CSS, SVG and a few lines
//! of script; nothing fetched, so it opens air-gapped) with the paper's tables, the plots and
//! a sortable table of every task run with its cases, unseen results by index, failure
//! reasons, trust level, digests and links to its logs.

pub mod compare;
mod tasks;

use std::fmt::Write;

use html_escape::encode_text;

use crate::aggregate::Aggregate;
use crate::generalization::{task_generalization, GeneralizationSummary};
use crate::plots;
use crate::{Report, TaskResult};

/// What the page says about where it came from, and where its links point.
pub struct PageInfo {
    pub title: String,
    /// The run's id, where known.
    pub run_id: Option<String>,
    /// Prefix for the run directory's relative paths (log files): "" when the page lies in the
    /// run directory.
    pub link_base: String,
}

pub(crate) fn esc(s: &str) -> String {
    encode_text(s).into_owned()
}

pub(crate) fn attr(s: &str) -> String {
    html_escape::encode_double_quoted_attribute(s).into_owned()
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |x| format!("{x:.digits$}"))
}

/// A number cell: shown rounded, its full value in `data-value` (what tests and scripts read).
pub(crate) fn num(key: &str, v: Option<f64>, digits: usize) -> String {
    let value = v.map(|x| x.to_string()).unwrap_or_default();
    format!(
        "<td class=\"n\" data-key=\"{key}\" data-value=\"{value}\">{}</td>",
        opt(v, digits)
    )
}

fn aggregates_table(rows: &[Aggregate]) -> String {
    let mut out = String::from(
        "<table id=\"aggregates\"><thead><tr><th>task type</th><th>tasks</th><th>runs</th>\
         <th>compile %</th><th>correct %</th><th>mean speedup</th><th>σ_r</th><th>mean score</th>\
         <th>geomean</th><th>fast₁ %</th><th>fast₂ %</th><th>trusted %</th><th>measured</th></tr></thead><tbody>",
    );
    for a in rows {
        let measured: Vec<String> = a.measured.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = write!(
            out,
            "<tr data-type=\"{}\"><td>{}</td>{}{}{}{}{}{}{}{}{}{}{}<td>{}</td></tr>",
            attr(&a.task_type),
            esc(&a.task_type),
            num("tasks", Some(a.tasks as f64), 0),
            num("runs", Some(a.runs as f64), 0),
            num("compile_rate", Some(a.compile_rate), 1),
            num("correct_rate", Some(a.correct_rate), 1),
            num("mean_speedup", Some(a.mean_speedup), 3),
            num("sigma_r", a.sigma_r, 3),
            num("mean_score", Some(a.mean_score), 1),
            num("geomean_speedup", a.geomean_speedup, 3),
            num("fast1", Some(a.fast1), 1),
            num("fast2", Some(a.fast2), 1),
            num("trusted_percent", Some(a.trusted_percent), 1),
            esc(&measured.join(", "))
        );
    }
    out.push_str("</tbody></table>");
    out
}

fn noise_table(rows: &[crate::noise::NoiseAware]) -> String {
    let mut out = String::from(
        "<table id=\"noise\"><thead><tr><th>task type</th><th>tasks</th><th>with interval</th>\
         <th>fast₁ % (lower bound ≥ 1)</th><th>fast₂ % (lower bound ≥ 2)</th>\
         <th>median ± %</th></tr></thead><tbody>",
    );
    for n in rows {
        let _ = write!(
            out,
            "<tr data-type=\"{}\"><td>{}</td>{}{}{}{}{}</tr>",
            attr(&n.task_type),
            esc(&n.task_type),
            num("tasks", Some(n.tasks as f64), 0),
            num("with_interval", Some(n.with_interval as f64), 0),
            num("fast1", Some(n.fast1), 1),
            num("fast2", Some(n.fast2), 1),
            num("median_half_width_pct", n.median_half_width_pct, 1),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// Where the run's time went (crate::time): phases and what they were spent on, side by side.
fn time_tables(t: &crate::time::TimeSummary) -> String {
    let mut out = format!(
        "<p class=\"muted\">{} task runs{}, {:.1} min in all, {:.2} device-hours.</p>",
        t.task_runs,
        if t.untimed > 0 {
            format!(" ({} without timings)", t.untimed)
        } else {
            String::new()
        },
        t.total_s / 60.0,
        t.device_hours
    );
    if let Some(b) = &t.busy {
        let _ = write!(
            out,
            "<p class=\"muted\" id=\"gpu-busy\">{}</p>",
            esc(&b.line())
        );
    }
    for (id, head, lines) in [
        ("time-phases", "phase", &t.phases),
        ("time-spent", "spent on", &t.spent_on),
        (
            "time-trusted-performance",
            "trusted performance, by part",
            &t.performance_parts,
        ),
    ] {
        if lines.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<table id=\"{id}\"><thead><tr><th>{head}</th><th>s</th><th>%</th></tr></thead><tbody>"
        );
        for l in lines.iter().filter(|l| l.seconds > 0.0) {
            let _ = write!(
                out,
                "<tr><td>{}</td>{}{}</tr>",
                esc(l.what),
                num("seconds", Some(l.seconds), 1),
                num("share", Some(100.0 * l.share), 1)
            );
        }
        out.push_str("</tbody></table>");
    }
    out
}

fn generalization_table(rows: &[GeneralizationSummary]) -> String {
    let mut out = String::from(
        "<table id=\"generalization\"><thead><tr><th>task type</th><th>task runs</th>\
         <th>both_pass</th><th>opt_regression</th><th>both_fail</th><th>opt_improvement</th>\
         <th>P(opt ✓ | orig ✓)</th><th>s̄ seen</th><th>s̄ unseen</th><th>Δg</th></tr></thead><tbody>",
    );
    for g in rows {
        let q = |k: &str| num(k, g.quadrants.get(k).map(|n| *n as f64), 0);
        let _ = write!(
            out,
            "<tr data-type=\"{}\"><td>{}</td>{}{}{}{}{}{}{}{}{}</tr>",
            attr(&g.task_type),
            esc(&g.task_type),
            num("task_runs", Some(g.task_runs as f64), 0),
            q("both_pass"),
            q("opt_regression"),
            q("both_fail"),
            q("opt_improvement"),
            num("conditional_correctness", g.conditional_correctness, 3),
            num("mean_seen_speedup", g.mean_seen_speedup, 3),
            num("mean_unseen_speedup", g.mean_unseen_speedup, 3),
            num("delta_g", g.delta_g, 3),
        );
    }
    out.push_str("</tbody></table>");
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:13px}\
th,td{border:1px solid #ccc;padding:3px 6px}th{background:#f3f3f3;cursor:pointer}\
td.n{text-align:right;font-variant-numeric:tabular-nums}\
tr.fail td{background:#fff3f3}figure{display:inline-block;margin:.5em}\
details{font-size:12px}code{font-size:11px}.muted{color:#777}";

/// Sorting the task table by a clicked column (numbers by `data-value`), or by the column the
/// URL names; `data-ready` tells a headless browser that the script ran.
const SCRIPT: &str = r#"
(function () {
  var table = document.getElementById("tasks");
  var heads = table.tHead.rows[0].cells;
  for (var i = 0; i < heads.length; i++) {
    heads[i].addEventListener("click", (function (col) {
      return function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = table.getAttribute("data-sort") !== col + "a";
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          var u = x.getAttribute("data-value"), v = y.getAttribute("data-value");
          var r = (u !== null && v !== null && u !== "" && v !== "")
            ? parseFloat(u) - parseFloat(v)
            : x.textContent.localeCompare(y.textContent);
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
        table.setAttribute("data-sort", col + (asc ? "a" : "d"));
      };
    })(i));
  }
  // `#sort=N` (or `#sort=N-desc`) sorts by column N on opening: a link can carry a view.
  var m = /^#sort=(\d+)(-desc)?$/.exec(window.location.hash);
  if (m && heads[+m[1]]) {
    heads[+m[1]].click();
    if (m[2]) heads[+m[1]].click();
  }
  document.body.setAttribute("data-ready", "1");
})();
"#;

/// The whole page.
pub fn render(report: &Report, results: &[TaskResult], info: &PageInfo) -> String {
    let mut sorted: Vec<&TaskResult> = results.iter().collect();
    sorted.sort_by(|a, b| (a.task_id.as_str(), a.repeat).cmp(&(b.task_id.as_str(), b.repeat)));
    let points: Vec<plots::TaskPoint> = report
        .tasks
        .iter()
        .map(|t| plots::TaskPoint {
            speedup: t.speedup,
            interval: t.speedup_interval,
        })
        .collect();
    let speedups: Vec<f64> = report.tasks.iter().map(|t| t.speedup).collect();
    let scores: Vec<(String, f64)> = report
        .tasks
        .iter()
        .map(|t| (t.task_type.clone(), t.score))
        .collect();
    let gens: Vec<_> = sorted
        .iter()
        .filter_map(|r| task_generalization(r))
        .collect();
    let mut out = String::with_capacity(64 * 1024 + 3 * 1024 * results.len());
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body><h1>{}</h1>",
        esc(&info.title),
        esc(&info.title)
    );
    if let Some(id) = &info.run_id {
        let _ = write!(out, "<p>Run <code>{}</code>. ", esc(id));
    } else {
        out.push_str("<p>");
    }
    let _ = write!(
        out,
        "{} task runs. {}</p>",
        report.tasks.len(),
        esc(report.measured_line().trim())
    );
    let only = report.trusted_only_line();
    if !only.is_empty() {
        let _ = write!(out, "<p id=\"trusted-only\">{}</p>", esc(only.trim()));
    }
    out.push_str("<h2>Aggregates (AgentKernelArena)</h2>");
    out.push_str(&aggregates_table(&report.aggregates));
    if !report.unscored.is_empty() {
        let _ = write!(
            out,
            "<h2>Without a result</h2><p><strong>{} task run(s) without a result, counted in no \
             number above</strong> (the same command runs them again).</p><ul>",
            report.unscored.len()
        );
        for u in &report.unscored {
            let why = crate::why_unscored(u);
            let _ = write!(
                out,
                "<li><code>{}</code> (repeat {}): {}</li>",
                esc(&u.task_id),
                u.repeat,
                esc(&why)
            );
        }
        out.push_str("</ul>");
    }
    if report.noise_aware.iter().any(|n| n.with_interval > 0) {
        out.push_str(
            "<h2>Noise-aware</h2><p class=\"muted\">A task counts as faster than p only when the \
             lower bound of its speedup's 95% bootstrap interval (paired samples, repeats pooled) \
             clears p.</p>",
        );
        out.push_str(&noise_table(&report.noise_aware));
    }
    if !report.generalization.is_empty() {
        out.push_str("<h2>Generalization to unseen configurations</h2>");
        out.push_str(&generalization_table(&report.generalization));
    }
    if report.time.total_s > 0.0 {
        out.push_str("<h2>Where the time went</h2>");
        out.push_str(&time_tables(&report.time));
    }
    out.push_str("<h2>Plots</h2>");
    let mut figure = |id: &str, svg: String| {
        let _ = write!(out, "<figure id=\"{id}\">{svg}</figure>");
    };
    figure("plot-speedup", plots::speedup_per_task(&points));
    figure("plot-fastp", plots::fast_p_curve(&speedups));
    if !gens.is_empty() {
        figure("plot-unseen", plots::seen_vs_unseen(&gens));
    }
    figure("plot-scores", plots::scores_by_type(&scores));
    out.push_str("<h2>Task runs</h2><p class=\"muted\">Click a column to sort. Unseen configurations are named by index only.</p>");
    out.push_str(&tasks::table(report, &sorted, info));
    let _ = writeln!(out, "<script>{SCRIPT}</script></body></html>");
    out
}

#[cfg(test)]
mod tests;
