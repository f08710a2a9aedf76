//! Rendering aggregates as Markdown and CSV tables.

use std::fmt::Write;

use crate::aggregate::Aggregate;
use crate::generalization::GeneralizationSummary;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |x| format!("{x:.digits$}"))
}

fn speedup_cell(a: &Aggregate) -> String {
    match a.sigma_r {
        Some(s) => format!("{:.3} ± {:.3}", a.mean_speedup, s),
        None => format!("{:.3}", a.mean_speedup),
    }
}

pub fn aggregates_markdown(rows: &[Aggregate]) -> String {
    let mut out = String::new();
    out.push_str("| task type | tasks | runs | trusted % | compile % | correct % | mean speedup ± σ_r | mean score | geomean | fast₁ % | fast₂ % |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for a in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {} | {:.1} | {:.1} |",
            a.task_type,
            a.tasks,
            a.runs,
            a.trusted_percent,
            a.compile_rate,
            a.correct_rate,
            speedup_cell(a),
            a.mean_score,
            opt(a.geomean_speedup, 3),
            a.fast1,
            a.fast2
        );
    }
    out
}

/// KernelBench's fast_p per task type, one column per threshold.
pub fn fast_p_markdown(rows: &[Aggregate]) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let mut out = format!("| task type | {} |\n|---|", fast_p_heads(&first.fast_p));
    out.push_str(&"---:|".repeat(first.fast_p.len()));
    out.push('\n');
    for a in rows {
        let _ = writeln!(out, "| {} | {} |", a.task_type, fast_p_cells(&a.fast_p));
    }
    out
}

/// The header cells of a fast_p table (`p = 0 | p = 0.5 | …`).
fn fast_p_heads(f: &[crate::aggregate::FastP]) -> String {
    let heads: Vec<String> = f.iter().map(|f| format!("p = {}", f.p)).collect();
    heads.join(" | ")
}

/// A row's fast_p cells, percentages to one decimal.
fn fast_p_cells(f: &[crate::aggregate::FastP]) -> String {
    let cells: Vec<String> = f.iter().map(|f| format!("{:.1}", f.percent)).collect();
    cells.join(" | ")
}

/// fast_p and the geometric mean against the original compiled by torch.compile, for the rows
/// that have tasks with that baseline (KernelBench's); empty where none has.
pub fn compiled_markdown(rows: &[Aggregate]) -> String {
    let with: Vec<(&Aggregate, &crate::aggregate::CompiledColumn)> = rows
        .iter()
        .filter_map(|a| Some((a, a.vs_compiled.as_ref()?)))
        .collect();
    let Some((_, first)) = with.first() else {
        return String::new();
    };
    let mut out = format!(
        "| task type | tasks | geomean | {} |\n|---|---:|---:|",
        fast_p_heads(&first.fast_p)
    );
    out.push_str(&"---:|".repeat(first.fast_p.len()));
    out.push('\n');
    for (a, c) in with {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            a.task_type,
            c.tasks,
            opt(c.geomean_speedup, 3),
            fast_p_cells(&c.fast_p)
        );
    }
    out
}

pub fn aggregates_csv(rows: &[Aggregate]) -> String {
    let mut out = String::from("task_type,tasks,runs,compile_rate,correct_rate,mean_speedup,sigma_r,mean_score,geomean_speedup,fast1,fast2,trusted_percent\n");
    let o = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    for a in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            a.task_type,
            a.tasks,
            a.runs,
            a.compile_rate,
            a.correct_rate,
            a.mean_speedup,
            o(a.sigma_r),
            a.mean_score,
            o(a.geomean_speedup),
            a.fast1,
            a.fast2,
            a.trusted_percent
        );
    }
    out
}

/// `P (both_pass/(both_pass+opt_regression))` over configurations, `-` where none was judged.
fn per_config(g: &GeneralizationSummary) -> String {
    let q = &g.config_quadrants;
    let both = q.get("both_pass").copied().unwrap_or(0);
    let denom = both + q.get("opt_regression").copied().unwrap_or(0);
    match g.config_conditional_correctness {
        Some(p) => format!("{p:.3} ({both}/{denom})"),
        None => "-".into(),
    }
}

pub fn generalization_markdown(rows: &[GeneralizationSummary]) -> String {
    let mut out = String::new();
    out.push_str("| task type | task runs | both_pass | opt_regression | both_fail | opt_improvement | P(opt ✓ \\| orig ✓) | per configuration | s̄ seen | s̄ unseen | Δg |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for g in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            g.task_type,
            g.task_runs,
            g.quadrants["both_pass"],
            g.quadrants["opt_regression"],
            g.quadrants["both_fail"],
            g.quadrants["opt_improvement"],
            opt(g.conditional_correctness, 3),
            per_config(g),
            opt(g.mean_seen_speedup, 3),
            opt(g.mean_unseen_speedup, 3),
            opt(g.delta_g, 3),
        );
    }
    let mut cats: Vec<(&String, &u32)> = rows
        .last()
        .map(|g| g.failures_by_category.iter().collect())
        .unwrap_or_default();
    if !cats.is_empty() {
        cats.sort();
        out.push_str("\n| unseen category | failures |\n|---|---:|\n");
        for (c, n) in cats {
            let _ = writeln!(out, "| {c} | {n} |");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_row_shape() {
        let a = Aggregate {
            task_type: "python2python".into(),
            tasks: 2,
            runs: 3,
            compile_rate: 100.0,
            correct_rate: 50.0,
            mean_speedup: 1.25,
            sigma_r: Some(0.1),
            mean_score: 182.5,
            geomean_speedup: None,
            fast1: 50.0,
            fast2: 0.0,
            fast_p: vec![
                crate::aggregate::FastP {
                    p: 0.0,
                    percent: 50.0,
                },
                crate::aggregate::FastP {
                    p: 1.0,
                    percent: 12.5,
                },
            ],
            vs_compiled: None,
            measured: Default::default(),
            trusted_percent: 50.0,
        };
        assert_eq!(compiled_markdown(std::slice::from_ref(&a)), "");
        let mut kb = a.clone();
        kb.task_type = "kernelbench".into();
        kb.vs_compiled = Some(crate::aggregate::CompiledColumn {
            tasks: 2,
            geomean_speedup: Some(0.8),
            fast_p: kb.fast_p.clone(),
        });
        assert_eq!(
            compiled_markdown(&[a.clone(), kb]),
            "| task type | tasks | geomean | p = 0 | p = 1 |\n|---|---:|---:|---:|---:|\n\
             | kernelbench | 2 | 0.800 | 50.0 | 12.5 |\n"
        );
        let md = aggregates_markdown(std::slice::from_ref(&a));
        let last = md.lines().last().unwrap();
        assert_eq!(
            last,
            "| python2python | 2 | 3 | 50.0 | 100.0 | 50.0 | 1.250 ± 0.100 | 182.5 | – | 50.0 | 0.0 |"
        );
        let fast = fast_p_markdown(std::slice::from_ref(&a));
        assert_eq!(
            fast,
            "| task type | p = 0 | p = 1 |\n|---|---:|---:|\n| python2python | 50.0 | 12.5 |\n"
        );
        let csv = aggregates_csv(&[a]);
        assert_eq!(
            csv.lines().nth(1).unwrap(),
            "python2python,2,3,100,50,1.25,0.1,182.5,,50,0,50"
        );
    }
}
