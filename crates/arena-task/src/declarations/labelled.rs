//! A list that labels the same configurations as the declared one (AgentKernelArena's
//! image_kernel tasks check small shapes and time labelled large ones):
//!
//! ```python
//! CASES = [dict(m=256, n=512, k=512, dtype_str="bfloat16"), …]
//! PERF_CASES = [("gemm_m4096_n4096_k4096", dict(m=4096, n=4096, k=4096, dtype_str="bfloat16")), …]
//! ```
//!
//! A module list named after the declared one (`PERF_CASES` beside `CASES`) whose every entry
//! is a (label, configuration) pair of the declared entries' form is a companion: its
//! configurations are visible ones too (the set is generated from both lists), and an unseen
//! set is written into both, each configuration labelled by its place in the set
//! (`unseen<k>`), so the performance command times unseen configurations as well. Left
//! visible, it would have been timed as the "unseen" performance.

use crate::shapes::{module_lists, Value};
use crate::unseen::entry::form;

/// Whether `companion` is named after `name`: `<PREFIX>_<name>` or `<name>_<SUFFIX>`.
fn named_after(companion: &str, name: &str) -> bool {
    companion != name
        && (companion.ends_with(&format!("_{name}")) || companion.starts_with(&format!("{name}_")))
}

/// The configuration of a (label, configuration) pair.
fn labelled(v: &Value) -> Option<&Value> {
    match v {
        Value::Tuple(xs) | Value::List(xs) => match xs.as_slice() {
            [Value::Str(_), c] => Some(c),
            _ => None,
        },
        _ => None,
    }
}

/// The companions of list `name` in `src` whose entries pair a label with a configuration of
/// `template`'s form, in source order: (list name, its configurations without labels).
pub fn companions(src: &str, name: &str, template: &Value) -> Vec<(String, Vec<Value>)> {
    let shape = form(template);
    module_lists(src)
        .into_iter()
        .filter(|(n, entries)| {
            named_after(n, name)
                && !entries.is_empty()
                && entries
                    .iter()
                    .all(|e| labelled(e).is_some_and(|c| form(c) == shape))
        })
        .map(|(n, entries)| {
            let configs = entries
                .iter()
                .filter_map(|e| labelled(e).cloned())
                .collect();
            (n, configs)
        })
        .collect()
}

/// `entries` of list `name` followed by the configurations of its companions ([`companions`]).
pub fn with_companions(src: &str, name: &str, mut entries: Vec<Value>) -> Vec<Value> {
    if let Some(t) = entries.first().cloned() {
        for (_, more) in companions(src, name, &t) {
            entries.extend(more);
        }
    }
    entries
}

/// `entries` (Python source) as a companion's pairs: `("unseen<k>", entry)`.
pub fn labelled_entries(entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .enumerate()
        .map(|(k, e)| format!("(\"unseen{k}\", {e})"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declarations::{rewrite, visible_entries, Declaration};

    const SRC: &str = "CASES = [\n    dict(m=256, n=512, k=512, dtype_str=\"bfloat16\"),\n    dict(m=128, n=256, k=512, dtype_str=\"float16\"),\n]\n\nPERF_CASES = [\n    (\"gemm_m4096\", dict(m=4096, n=4096, k=4096, dtype_str=\"bfloat16\")),\n]\n\nOTHER_CASES = [(\"x\", 3)]\n";

    #[test]
    fn a_labelled_list_of_the_same_form_is_a_companion_and_is_rewritten_alike() {
        let decl = Declaration::Assign("CASES".into());
        let visible = visible_entries(SRC, &decl).unwrap();
        let found = companions(SRC, "CASES", &visible[0]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "PERF_CASES");
        assert_eq!(
            found[0].1[0].to_python(),
            "{\"m\": 4096, \"n\": 4096, \"k\": 4096, \"dtype_str\": \"bfloat16\"}"
        );
        let entries = vec![
            "{\"m\": 64, \"n\": 128, \"k\": 32, \"dtype_str\": \"float16\"}".to_string(),
            "{\"m\": 1, \"n\": 4096, \"k\": 512, \"dtype_str\": \"bfloat16\"}".to_string(),
        ];
        let out = rewrite(SRC, &decl, &entries).unwrap();
        assert!(
            out.contains("PERF_CASES = [\n    (\"unseen0\", {\"m\": 64,"),
            "{out}"
        );
        assert!(out.contains("    (\"unseen1\", {\"m\": 1,"), "{out}");
        assert!(!out.contains("gemm_m4096"), "{out}");
        // A list of another form is left alone.
        assert!(out.contains("OTHER_CASES = [(\"x\", 3)]"), "{out}");
    }

    #[test]
    fn lists_not_named_after_it_or_of_another_form_are_not_companions() {
        // BENCH has the form but not the name; PERF_CASES the name but not the form.
        let src =
            "CASES = [(1, 2)]\nBENCH = [(\"a\", (3, 4))]\nPERF_CASES = [(\"a\", (3, 4, 5))]\n";
        let t = visible_entries(src, &Declaration::Assign("CASES".into())).unwrap();
        assert!(companions(src, "CASES", &t[0]).is_empty());
        // Unlabelled entries are another list, not a companion.
        let src = "CASES = [(1, 2)]\nPERF_CASES = [(3, 4)]\n";
        assert!(companions(src, "CASES", &t[0]).is_empty());
    }
}
