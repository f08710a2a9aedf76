//! What Triton's autotuner chose in each performance run of a paired self-reported
//! evaluation. An autotuned kernel (`@triton.autotune`) picks its configuration by timing
//! every candidate configuration in its own process, so two processes of identical code can
//! pick differently, and the kernel's time moves with the pick: on an H100, eight runs of
//! AgentKernelArena's `triton_fla_l2norm` picked four configurations of its 25, and the runs
//! that picked `num_warps: 1` read 1.60 µs per call where the others read 1.44–1.49 µs
//! (docs/benchmarks.md). A paired evaluation's rounds then sample that choice as well as the
//! kernel, and an untouched kernel can read several percent off itself. The runs'
//! choices are recorded (arena sets `TRITON_PRINT_AUTOTUNING=1` for performance runs and reads
//! what Triton printed) and a kernel whose runs did not all choose alike is named, so that a
//! reader knows why its rounds spread. It is a note, never a gate: the output is the kernel's
//! own, and what it prints changes no number.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::untrusted::read_text_beneath;

/// Set in a performance run's environment: Triton then prints each finished autotuning.
pub const PRINT_ENV: (&str, &str) = ("TRITON_PRINT_AUTOTUNING", "1");
/// At most this many choices are kept per run, each field at most [`FIELD_CAP`] characters:
/// the output is the kernel's, and may print anything.
const RUN_CAP: usize = 64;
const FIELD_CAP: usize = 200;
const READ_CAP: u64 = 4 << 20;

/// One finished autotuning: the kernel, the key it tuned for and the configuration chosen.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Choice {
    pub kernel: String,
    pub key: String,
    pub config: String,
}

/// The choices of an evaluation's performance runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Autotuning {
    /// Per performance run (its step, e.g. `perf-r1-baseline`), in the order printed.
    pub runs: BTreeMap<String, Vec<Choice>>,
    /// Each kernel whose runs chose differently for one (kernel, key), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub varied: Vec<String>,
}

fn pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // Triton 3.x, runtime/autotuner.py: "Triton autotuning for function {name},\nwith key as
    // {key},\nfinished after {t}s,\nbest config selected: {config};"
    RE.get_or_init(|| {
        Regex::new(
            r"Triton autotuning for function (\S+),\s*with key as ([^\n]*),\s*finished after [0-9.eE+-]+s,\s*best config selected: ([^\n]*);",
        )
        .expect("autotune pattern")
    })
}

fn capped(s: &str) -> String {
    s.trim().chars().take(FIELD_CAP).collect()
}

/// The autotunings printed in `output`, in order.
pub fn choices(output: &str) -> Vec<Choice> {
    pattern()
        .captures_iter(output)
        .take(RUN_CAP)
        .map(|c| Choice {
            kernel: capped(&c[1]),
            key: capped(&c[2]),
            config: capped(&c[3]),
        })
        .collect()
}

/// The choices of each run (`runs`: its step, whose kernel it ran, e.g. "the original
/// kernel", and its output), and which kernel's runs varied. `None` where no run autotuned.
pub fn summarize<'a>(
    runs: impl IntoIterator<Item = (String, &'a str, &'a str)>,
) -> Option<Autotuning> {
    let mut a = Autotuning::default();
    // (whose, kernel, key) -> configurations chosen, and in how many runs it was tuned.
    let mut seen: BTreeMap<(&str, String, String), (BTreeSet<String>, usize)> = BTreeMap::new();
    for (step, whose, output) in runs {
        let chosen = choices(output);
        if chosen.is_empty() {
            continue;
        }
        for c in &chosen {
            let e = seen
                .entry((whose, c.kernel.clone(), c.key.clone()))
                .or_default();
            e.0.insert(c.config.clone());
            e.1 += 1;
        }
        a.runs.insert(step, chosen);
    }
    if a.runs.is_empty() {
        return None;
    }
    for ((whose, kernel, key), (configs, n)) in seen {
        if configs.len() > 1 {
            a.varied.push(format!(
                "{whose} chose {} configurations of {kernel} (key {key}) in {n} runs: its times move with the choice",
                configs.len()
            ));
        }
    }
    Some(a)
}

/// [`summarize`] over runs whose output was kept in `perf_dir/<step>/<output>` (`steps`: each
/// run's step and whose kernel it ran). A run whose output cannot be read counts as one that
/// printed nothing.
pub fn read_runs(perf_dir: &Path, output: &str, steps: &[(String, &str)]) -> Option<Autotuning> {
    let texts: Vec<String> = steps
        .iter()
        .map(|(step, _)| {
            read_text_beneath(&perf_dir.join(step), Path::new(output), READ_CAP).unwrap_or_default()
        })
        .collect();
    summarize(
        steps
            .iter()
            .zip(&texts)
            .map(|((step, whose), text)| (step.clone(), *whose, text.as_str())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(kernel: &str, warps: u32) -> String {
        format!(
            "Autotuning kernel {kernel} with config BT: 8, num_warps: 1\n\
             Triton autotuning for function {kernel},\nwith key as (128, 'torch.float32', 'torch.float32'),\n\
             finished after 11.06s,\nbest config selected: BT: 8, num_warps: {warps}, num_ctas: 1, num_stages: 3, maxnreg: None;\n\
             Performance: measured 5 test case(s)\n"
        )
    }

    #[test]
    fn a_choice_is_read_as_triton_prints_it() {
        let c = choices(&printed("l2norm_fwd_kernel", 4));
        assert_eq!(
            c,
            vec![Choice {
                kernel: "l2norm_fwd_kernel".into(),
                key: "(128, 'torch.float32', 'torch.float32')".into(),
                config: "BT: 8, num_warps: 4, num_ctas: 1, num_stages: 3, maxnreg: None".into(),
            }]
        );
        // The per-configuration lines alone are no choice.
        assert!(choices("Autotuning kernel k with config BT: 8\n").is_empty());
    }

    #[test]
    fn runs_that_chose_differently_are_named_per_kernel() {
        let (a, b, c) = (printed("k", 1), printed("k", 4), printed("k", 4));
        let runs = vec![
            (
                "perf1-baseline".to_string(),
                "the original kernel",
                a.as_str(),
            ),
            (
                "perf2-baseline".to_string(),
                "the original kernel",
                b.as_str(),
            ),
            (
                "perf1-candidate".to_string(),
                "the agent's kernel",
                c.as_str(),
            ),
            (
                "perf2-candidate".to_string(),
                "the agent's kernel",
                c.as_str(),
            ),
        ];
        let t = summarize(runs).unwrap();
        assert_eq!(t.runs.len(), 4);
        assert_eq!(t.varied.len(), 1, "{:?}", t.varied);
        assert!(t.varied[0].starts_with("the original kernel chose 2 configurations of k"));
        assert!(t.varied[0].contains("in 2 runs"));
    }

    #[test]
    fn no_autotuning_is_no_record_and_alike_runs_are_no_note() {
        assert!(summarize(vec![("r".to_string(), "k", "Performance: 1 ms")]).is_none());
        let a = printed("k", 8);
        let t = summarize(vec![
            ("r1".to_string(), "k", a.as_str()),
            ("r2".to_string(), "k", a.as_str()),
        ])
        .unwrap();
        assert!(t.varied.is_empty());
    }

    #[test]
    fn what_a_kernel_prints_is_bounded() {
        let long = format!(
            "Triton autotuning for function {},\nwith key as k,\nfinished after 1s,\nbest config selected: c;\n",
            "x".repeat(10_000)
        );
        let many = long.repeat(100);
        let c = choices(&many);
        assert_eq!(c.len(), RUN_CAP);
        assert_eq!(c[0].kernel.chars().count(), FIELD_CAP);
    }
}
