//! One performance run of a self-reported harness read the way AgentKernelArena's evaluator
//! reads it, so that a task's cases are the ones AKA scores. In AKA's order: the first report
//! that holds cases of `build/performance_report.json`, `performance_report.json`,
//! `build/perf_report.json`, `perf_report.json`, `perf/benchmark_results.json` (rocmbench's
//! pytest helper); else cases printed in the command's output (`Test case N: X ms`,
//! `Shape [..]: X ms`, several `Performance: X ms`); else one case from a single time printed
//! (`GEAK_RESULT_LATENCY_MS=X` first, then `Performance: X ms`, `execution time: X ms`, …).
//!
//! Two departures, both toward refusing rather than guessing: AKA's last resort (any number
//! followed by `ms` or `s` anywhere in the output) is not taken, since it reads a warm-up
//! message as a kernel time; and a time that is not a finite number (Python's `json` writes
//! `NaN` and `Infinity`) is a failed case named as such, never a measurement.

use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::record::PerfCase;
use crate::untrusted::{read_text_beneath, Refusal};

/// The copies gates.py makes of one run's reports (`<dir>/<copy>`), for each place AKA looks.
pub const REPORTS: [(&str, &str); 5] = [
    ("build/performance_report.json", "performance_report.json"),
    ("performance_report.json", "alt/performance_report.json"),
    ("build/perf_report.json", "alt/build-perf_report.json"),
    ("perf_report.json", "alt/perf_report.json"),
    (
        "perf/benchmark_results.json",
        "alt/perf-benchmark_results.json",
    ),
];
/// The command's output (stdout and stderr, its last MiB), where gates.py kept it.
pub const OUTPUT: &str = "output";
/// Keys of a case that only arena writes (its pairing and its reading of the report): a
/// harness's report that holds them has them dropped, or a harness could hand the scorer its
/// own "paired" baseline. Arena's trusted evaluator writes them ([`Writer::Arena`]).
pub const ARENA_KEYS: [&str; 17] = [
    "baseline_ms",
    "calls_per_batch",
    "timing",
    "graph_error",
    "cycles",
    "baseline_cycles",
    "pairs_ms",
    "compiled_ms",
    "compiled_pairs_ms",
    "compiled_error",
    "paired_by",
    "pair_sessions",
    "stop",
    "samples_ms",
    "method",
    "time_key",
    "reported",
];
const CAP: u64 = 4 << 20;

/// What a run reported: its cases and where they were read.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub cases: Vec<PerfCase>,
    pub source: String,
}

/// Which kernel a report is of: torch2hip harnesses time both in one run (`ori_time` is the
/// PyTorch original's, `opt_time` the HIP kernel's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Baseline,
    Candidate,
}

/// Who wrote a report: arena's trusted evaluator (its pairing keys are kept), or a task's
/// harness, which the kernel under test may have rewritten ([`ARENA_KEYS`] are dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Writer {
    Arena,
    #[default]
    Harness,
}

/// Reads the run kept in `dir`. Err: why no case was found (each place named).
pub fn read_run(dir: &Path, task_type: &str, side: Side, writer: Writer) -> Result<Run, String> {
    let mut why = Vec::new();
    for (place, copy) in REPORTS {
        match read_text_beneath(dir, Path::new(copy), CAP) {
            Ok(text) => match parse_json(&text) {
                Ok(v) => {
                    let cases = cases_of_json(&v, task_type, side, writer);
                    if !cases.is_empty() {
                        return Ok(Run {
                            cases,
                            source: place.to_string(),
                        });
                    }
                    why.push(format!("{place}: no case with a time"));
                }
                Err(e) => why.push(format!("{place}: unreadable ({e})")),
            },
            Err(Refusal::Missing) => {}
            Err(r) => why.push(format!("{place}: refused ({r})")),
        }
    }
    let output = read_text_beneath(dir, Path::new(OUTPUT), CAP).unwrap_or_default();
    let cases = cases_of_output(&output);
    if !cases.is_empty() {
        return Ok(Run {
            cases,
            source: "output: test cases".into(),
        });
    }
    if let Some((ms, pattern)) = single_time(&output) {
        return Ok(Run {
            cases: vec![PerfCase::new("test_case_0", ms)],
            source: format!("output: {pattern}"),
        });
    }
    why.push("the output: no time printed".into());
    Err(format!("no performance report: {}", why.join("; ")))
}

/// JSON as Python's `json` writes it, `NaN` and `Infinity` included (read by JSON5, which
/// has them; serde_json's values cannot hold them, so they become the strings `NaN`, `inf`,
/// `-inf`, which [`float`] reads back as the numbers they were).
fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).or_else(|e| {
        // JSON5's parser recurses once per level: a hostile report of nested brackets would
        // overflow the runner's stack. serde_json refuses past 128 levels; so does this.
        if nesting(text) > MAX_NESTING {
            return Err(e.to_string());
        }
        json5::from_str::<Loose>(text)
            .map(Loose::into_value)
            .map_err(|_| e.to_string())
    })
}

const MAX_NESTING: usize = 128;

/// The deepest nesting of brackets and braces outside strings.
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Loose {
    Null,
    Bool(bool),
    Int(i64),
    Num(f64),
    Str(String),
    List(Vec<Loose>),
    Map(std::collections::BTreeMap<String, Loose>),
}

impl Loose {
    fn into_value(self) -> Value {
        match self {
            Loose::Null => Value::Null,
            Loose::Bool(b) => Value::Bool(b),
            Loose::Int(i) => Value::from(i),
            Loose::Num(f) => serde_json::Number::from_f64(f)
                .map(Value::Number)
                .unwrap_or_else(|| Value::String(format!("{f}"))),
            Loose::Str(s) => Value::String(s),
            Loose::List(l) => Value::Array(l.into_iter().map(Loose::into_value).collect()),
            Loose::Map(m) => {
                Value::Object(m.into_iter().map(|(k, v)| (k, v.into_value())).collect())
            }
        }
    }
}

fn float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// A case's time in ms and the key it came from, as AKA's `_extract_time_from_dict` reads it.
fn time_of(d: &Map<String, Value>, task_type: &str, side: Side) -> Option<(f64, String)> {
    if task_type == "torch2hip" {
        let key = match side {
            Side::Baseline => "ori_time",
            Side::Candidate => "opt_time",
        };
        if let Some(t) = d.get(key).and_then(float) {
            return Some((t, key.into()));
        }
    }
    for key in ["execution_time_ms", "execution_time", "time_ms", "time"] {
        if let Some(t) = d.get(key).and_then(float) {
            // A bare `time` of a thousand or more is taken to be in seconds, as AKA does.
            let ms = if key.ends_with("_ms") || t < 1000.0 {
                t
            } else {
                t * 1000.0
            };
            return Some((ms, key.into()));
        }
    }
    if let Some(Value::Object(timing)) = d.get("timing_ms") {
        if let Some(stat) = ["mean", "median", "min"]
            .into_iter()
            .find(|k| timing.contains_key(*k))
        {
            return timing
                .get(stat)
                .and_then(float)
                .map(|t| (t, format!("timing_ms.{stat}")));
        }
    }
    d.get("bytes_per_second_gs")
        .and_then(float)
        .filter(|b| *b > 0.0)
        .map(|b| (1.0 / b, "bytes_per_second_gs (inverse)".into()))
}

fn case_of(
    d: &Map<String, Value>,
    default_id: String,
    task_type: &str,
    side: Side,
    writer: Writer,
) -> Option<PerfCase> {
    let (ms, key) = time_of(d, task_type, side)?;
    let id = match d.get("test_case_id") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => default_id,
    };
    let mut case = PerfCase::new(&id, ms);
    for (k, v) in d {
        let arenas = writer == Writer::Harness && ARENA_KEYS.contains(&k.as_str());
        if k == "error" {
            case.error = crate::record::error_text(v.clone());
        } else if k != "test_case_id" && k != "execution_time_ms" && !arenas {
            case.extra.insert(k.clone(), v.clone());
        }
    }
    if key != "execution_time_ms" {
        case.extra.insert("time_key".into(), Value::String(key));
    }
    if !ms.is_finite() {
        // Not a measurement, and JSON cannot hold it: a failed case that says what it was.
        case.extra
            .insert("reported".into(), Value::String(format!("{ms}")));
        case.execution_time_ms = -1.0;
    }
    if writer == Writer::Arena {
        // Arena's own pairing keys, read by their schema (record::Pairing).
        let id = case.test_case_id.clone();
        return Some(case.typed().unwrap_or_else(|e| {
            let mut failed = PerfCase::new(&id, -1.0);
            failed.error = Some(format!(
                "the evaluator's pairing of this case is not readable: {e}"
            ));
            failed
        }));
    }
    Some(case)
}

fn cases_of_json(v: &Value, task_type: &str, side: Side, writer: Writer) -> Vec<PerfCase> {
    let list = match v {
        Value::Array(a) => Some(a),
        Value::Object(o) => match o.get("test_cases") {
            Some(Value::Array(a)) => Some(a),
            _ => None,
        },
        _ => None,
    };
    if let Some(list) = list {
        return list
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                case_of(
                    c.as_object()?,
                    format!("test_case_{i}"),
                    task_type,
                    side,
                    writer,
                )
            })
            .collect();
    }
    let Value::Object(o) = v else {
        return Vec::new();
    };
    if let Some(c) = case_of(o, "test_case_0".into(), task_type, side, writer) {
        return vec![c];
    }
    // A single object of custom `…_ms` keys: one case per key, in name order.
    let mut keys: Vec<&String> = o.keys().filter(|k| k.ends_with("_ms")).collect();
    keys.sort();
    let many = keys.len() > 1;
    keys.iter()
        .enumerate()
        .filter_map(|(i, k)| {
            let ms = float(&o[k.as_str()])?;
            let name = k.trim_end_matches("_ms");
            let id = if many {
                format!("{name}_{i}")
            } else {
                name.to_string()
            };
            let mut c = PerfCase::new(&id, if ms.is_finite() { ms } else { -1.0 });
            c.extra
                .insert("time_key".into(), Value::String(k.to_string()));
            Some(c)
        })
        .collect()
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("a valid pattern"))
}

/// Several cases printed: `Test case N: X ms`, `Shape [a, b]: X ms`, or (if neither) every
/// `Performance: X ms`.
fn cases_of_output(out: &str) -> Vec<PerfCase> {
    static TEST: OnceLock<Regex> = OnceLock::new();
    static SHAPE: OnceLock<Regex> = OnceLock::new();
    static PERF: OnceLock<Regex> = OnceLock::new();
    let mut cases = Vec::new();
    for c in re(
        &TEST,
        r"(?i)(?:Test\s+case|TestCase)\s+(\d+)[:\s]+([0-9.]+)\s*ms",
    )
    .captures_iter(out)
    {
        if let Ok(ms) = c[2].parse() {
            cases.push(PerfCase::new(&format!("test_case_{}", &c[1]), ms));
        }
    }
    for (i, c) in re(
        &SHAPE,
        r"(?i)shape[:\s]+\[([0-9,\s]+)\][:\s]+([0-9.]+)\s*ms",
    )
    .captures_iter(out)
    .enumerate()
    {
        if let Ok(ms) = c[2].parse() {
            let mut case = PerfCase::new(&format!("shape_{i}"), ms);
            let shape: Vec<Value> = c[1]
                .split(',')
                .filter_map(|x| x.trim().parse::<i64>().ok().map(Value::from))
                .collect();
            case.extra.insert("shape".into(), Value::Array(shape));
            cases.push(case);
        }
    }
    if cases.is_empty() {
        for (i, c) in re(&PERF, r"(?i)Performance:\s*([0-9.]+)\s*ms")
            .captures_iter(out)
            .enumerate()
        {
            if let Ok(ms) = c[1].parse() {
                cases.push(PerfCase::new(&format!("perf_{i}"), ms));
            }
        }
    }
    cases
}

/// One time printed, by the first of AKA's patterns that matches (positive times only).
fn single_time(out: &str) -> Option<(f64, &'static str)> {
    static PATTERNS: OnceLock<Vec<(Regex, f64, &'static str)>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            (
                r"GEAK_RESULT_LATENCY_MS=([0-9.]+)",
                1.0,
                "GEAK_RESULT_LATENCY_MS",
            ),
            (
                r"(?i)Performance:\s*([0-9.]+)\s*ms",
                1.0,
                "Performance: X ms",
            ),
            (
                r"(?i)Performance:\s*([0-9.]+)\s*s(?:econds?)?",
                1000.0,
                "Performance: X s",
            ),
            (
                r"(?i)execution[_\s]time[:\s]+([0-9.]+)\s*ms",
                1.0,
                "execution time: X ms",
            ),
            (
                r"(?i)execution[_\s]time[:\s]+([0-9.]+)\s*s(?:econds?)?",
                1000.0,
                "execution time: X s",
            ),
            (
                r"(?i)elapsed[_\s]time[:\s]+([0-9.]+)\s*ms",
                1.0,
                "elapsed time: X ms",
            ),
            (
                r"(?i)elapsed[_\s]time[:\s]+([0-9.]+)\s*s(?:econds?)?",
                1000.0,
                "elapsed time: X s",
            ),
            (
                r"(?i)avg[_\s]time[:\s]+([0-9.]+)\s*ms",
                1.0,
                "avg time: X ms",
            ),
            (
                r"(?i)avg[_\s]time[:\s]+([0-9.]+)\s*s(?:econds?)?",
                1000.0,
                "avg time: X s",
            ),
        ]
        .into_iter()
        .map(|(p, m, name)| (Regex::new(p).expect("a valid pattern"), m, name))
        .collect()
    });
    for (re, mult, name) in patterns {
        if let Some(c) = re.captures(out) {
            if let Ok(v) = c[1].parse::<f64>() {
                if v * mult > 0.0 {
                    return Some((v * mult, name));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
