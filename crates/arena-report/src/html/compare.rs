//! `arenactl compare --format html`: the paired comparison of two runs as one page.

use std::fmt::Write;

use super::{esc, num, STYLE};
use crate::compare::{Comparison, Side};

fn side(key: &str, s: &Side) -> String {
    format!(
        "{}{}<td>{}/{}</td>",
        num(&format!("{key}_speedup"), Some(s.mean_speedup), 3),
        num(&format!("{key}_sigma"), s.sigma, 3),
        s.correct_runs,
        s.runs
    )
}

pub fn render(c: &Comparison) -> String {
    let mut out = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>arena compare</title>\
         <style>{STYLE}</style></head><body><h1>A = {}<br>B = {}</h1><p id=\"verdict\">{}</p>\
         <table id=\"tasks\"><thead><tr><th>task</th><th>A speedup</th><th>σ</th><th>A correct</th>\
         <th>B speedup</th><th>σ</th><th>B correct</th><th>B / A</th><th>gates</th></tr></thead><tbody>",
        esc(&c.a),
        esc(&c.b),
        esc(&c.verdict)
    );
    for t in &c.tasks {
        let _ = write!(
            out,
            "<tr data-task=\"{}\"><td>{}</td>{}{}{}<td>{}</td></tr>",
            super::attr(&t.task_id),
            esc(&t.task_id),
            side("a", &t.a),
            side("b", &t.b),
            num("ratio", t.ratio, 3),
            t.flip.unwrap_or("")
        );
    }
    out.push_str("</tbody></table>");
    for (name, list) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        if !list.is_empty() {
            let _ = write!(out, "<p>Only in {name}: {}</p>", esc(&list.join(", ")));
        }
    }
    out.push_str("</body></html>\n");
    out
}
