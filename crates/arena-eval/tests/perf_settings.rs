//! job.json's `perf` as both sides hold it: arena-eval's `trusted::PerfSettings` (which the
//! runner writes, every field) and the evaluator's `perf_settings.PerfSettings` (which reads it
//! once, typed). The Rust defaults, serialized, are read by the evaluator field for field, and
//! equal the Python defaults that scripts writing their own jobs use; a job that lacks a field,
//! adds one, or gives one the wrong type is refused, named.

mod common;

use arena_eval::trusted::PerfSettings;
use common::evaluator_python;

fn script(rust: &str) -> String {
    format!(
        r#"
import dataclasses, json, sys
sys.path.insert(0, sys.argv[1])
from perf_settings import PerfSettings
rust = json.loads({rust:?})
out = {{"python_defaults": PerfSettings().as_job(), "read": dataclasses.asdict(PerfSettings.of(rust))}}
bad = {{
    "unknown": dict(rust, busy_trys=3),
    "missing": {{k: v for k, v in rust.items() if k != "output_samples"}},
    "bool_as_int": dict(rust, pairs=True),
    "float_as_int": dict(rust, max_calls=4096.0),
    "text": dict(rust, target_batch_ms="20"),
    "int_as_bool": dict(rust, graphs=1),
    "not_an_object": [],
}}
out["refused"] = {{}}
for name, perf in bad.items():
    try:
        PerfSettings.of(perf)
        out["refused"][name] = None
    except ValueError as e:
        out["refused"][name] = str(e)
out["int_for_float"] = PerfSettings.of(dict(rust, target_batch_ms=20)).target_batch_ms
print(json.dumps(out))
"#
    )
}

#[test]
fn the_evaluator_reads_every_field_the_runner_writes_with_the_same_defaults() {
    let rust = serde_json::to_value(PerfSettings::default()).unwrap();
    let v = evaluator_python(&script(&rust.to_string()));
    assert_eq!(v["read"], rust, "read field for field");
    assert_eq!(
        v["python_defaults"], rust,
        "the Python defaults (scripts' jobs) are the runner's"
    );
    assert_eq!(v["int_for_float"], 20.0);
    let refused = v["refused"].as_object().unwrap();
    for (name, why) in [
        ("unknown", "busy_trys"),
        ("missing", "output_samples"),
        ("bool_as_int", "perf.pairs"),
        ("float_as_int", "perf.max_calls"),
        ("text", "perf.target_batch_ms"),
        ("int_as_bool", "perf.graphs"),
        ("not_an_object", "must be an object"),
    ] {
        let e = refused[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name} was read: {v}"));
        assert!(e.contains(why), "{name}: {e}");
    }
}

/// Every read of the settings in the evaluator's code (`perf.X`, `self.perf.X`) names a field:
/// most of them run only on a GPU (gpu.py), where no test of this machine reaches them, and a
/// misspelt one would fail only there.
#[test]
fn every_read_of_the_settings_names_a_field() {
    let v = evaluator_python(
        r#"
import ast, dataclasses, json, os, sys
sys.path.insert(0, sys.argv[1])
from perf_settings import PerfSettings
fields = {f.name for f in dataclasses.fields(PerfSettings)}
reads = {}
for name in sorted(os.listdir(sys.argv[1])):
    if not name.endswith(".py") or name == "perf_settings.py":  # there `perf` is the job's dict
        continue
    for node in ast.walk(ast.parse(open(os.path.join(sys.argv[1], name)).read())):
        if not isinstance(node, ast.Attribute):
            continue
        v = node.value
        if (isinstance(v, ast.Name) and v.id == "perf") or (
            isinstance(v, ast.Attribute) and v.attr == "perf" and isinstance(v.value, ast.Name) and v.value.id == "self"
        ):
            reads.setdefault(node.attr, []).append(f"{name}:{node.lineno}")
print(json.dumps({"unknown": {k: w for k, w in reads.items() if k not in fields}, "read": sorted(reads)}))
"#,
    );
    assert_eq!(v["unknown"], serde_json::json!({}), "{v}");
    let read: Vec<&str> = v["read"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x.as_str())
        .collect();
    // The scan sees the reads it is there for (gpu.py's, timing.py's, measure.py's).
    for f in ["deferred_limit_ms", "output_samples", "busy_tries", "pairs"] {
        assert!(read.contains(&f), "{f} not among the reads found: {read:?}");
    }
}

/// A script's trial settings (`ARENA_PERF`, `ARENA_BENCH_PERF`): the defaults, the script's own
/// fields, and the variable's JSON object over them; refused, naming the variable, where it is
/// not JSON, not an object, sets a field the script sets, or names a field PerfSettings lacks.
#[test]
fn a_scripts_trial_settings_are_read_over_the_defaults_or_refused_by_name() {
    let v = evaluator_python(
        r#"
import json, sys
sys.path.insert(0, sys.argv[1])
from perf_settings import PerfSettings
s = PerfSettings.overridden({"pairs": 3}, '{"target_batch_ms": 5}', "ARENA_PERF")
out = {"read": [s.pairs, s.target_batch_ms, s.max_calls], "none": PerfSettings.overridden({}, None, "V") == PerfSettings()}
out["refused"] = {}
for text in ('{bad', '[1]', '{"pairs": 4}', '{"bogus": 1}', '{"max_calls": "x"}'):
    try:
        PerfSettings.overridden({"pairs": 3}, text, "ARENA_PERF")
        out["refused"][text] = None
    except ValueError as e:
        out["refused"][text] = str(e)
print(json.dumps(out))
"#,
    );
    assert_eq!(v["read"], serde_json::json!([3, 5.0, 4096]), "{v}");
    assert_eq!(v["none"], true, "{v}");
    for (text, why) in [
        ("{bad", "not JSON"),
        ("[1]", "a JSON object"),
        ("{\"pairs\": 4}", "['pairs'] are set otherwise"),
        ("{\"bogus\": 1}", "bogus"),
        ("{\"max_calls\": \"x\"}", "perf.max_calls"),
    ] {
        let e = v["refused"][text]
            .as_str()
            .unwrap_or_else(|| panic!("{text} was taken: {v}"));
        assert!(
            e.starts_with("ARENA_PERF: ") && e.contains(why),
            "{text}: {e}"
        );
    }
}
