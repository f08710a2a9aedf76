//! One schema for a performance case in both languages: the keys and JSON types of the Rust
//! types (arena_eval::record::PerfCase, with every field set) are exactly the trusted
//! evaluator's `record.CASE` (trusted/arena_trusted/record.py), which measure.py and
//! simulated.py check every case against before writing it. Every typed measurement key is one
//! a task harness's report has dropped (aka_perf::ARENA_KEYS), AgentKernelArena's own keys
//! stay verbatim, and `record.checked` refuses a key or a type the schema does not have.

mod common;

use std::collections::BTreeMap;

use arena_eval::aka_perf::ARENA_KEYS;
use arena_eval::record::{Measured, PairedBy, Pairing, PerfCase, PerfStop, StopReason, TimingMode};
use common::evaluator_python;
use serde_json::Value;

/// A case with every typed field set. A struct literal, not `..Default`: a field added to the
/// Rust types stops this from compiling until the schema below (and record.py) say it.
fn full_case() -> PerfCase {
    PerfCase {
        test_case_id: "perf1".into(),
        execution_time_ms: 1.5,
        pairing: Pairing {
            baseline_ms: Some(1.5),
            pairs_ms: Some(vec![[1.5, 1.25]]),
            paired_by: Some(PairedBy::Session),
            pair_sessions: Some(vec![0]),
            stop: Some(PerfStop {
                sessions: 5,
                least: 5,
                most: 10,
                target: 0.02,
                width: Some(0.01),
                reason: StopReason::Narrow,
            }),
            compiled_ms: Some(1.5),
            compiled_pairs_ms: Some(vec![[1.5, 1.25]]),
            compiled_error: Some("did not start".into()),
            cycles: Some(7),
            baseline_cycles: Some(9),
        },
        measured: Measured {
            samples_ms: Some(vec![1.25]),
            calls_per_batch: Some(BTreeMap::from([("candidate".into(), 512)])),
            timing: Some(BTreeMap::from([("candidate".into(), TimingMode::Graph)])),
            graph_error: Some(BTreeMap::from([(
                "baseline".into(),
                "not capturable".into(),
            )])),
            method: Some("arena trusted".into()),
        },
        error: Some("none".into()),
        extra: BTreeMap::new(),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

#[test]
fn the_evaluator_writes_a_case_by_the_runners_schema() {
    let rust: BTreeMap<String, &str> = match serde_json::to_value(full_case()).unwrap() {
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), json_type(v))).collect(),
        other => panic!("{other}"),
    };
    let py = evaluator_python(
        "import json, sys; sys.path.insert(0, sys.argv[1]); import record; \
         print(json.dumps({'case': record.CASE, 'aka': record.AKA}))",
    );
    let case: BTreeMap<String, String> = serde_json::from_value(py["case"].clone()).unwrap();
    let rust_owned: BTreeMap<String, String> = rust
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    assert_eq!(case, rust_owned, "record.py's CASE against the Rust types");

    // What arena measures, a harness cannot hand in.
    for key in rust.keys() {
        if !["test_case_id", "execution_time_ms", "error"].contains(&key.as_str()) {
            assert!(
                ARENA_KEYS.contains(&key.as_str()),
                "{key} is not in ARENA_KEYS"
            );
        }
    }
    // AgentKernelArena's own keys are not typed: kept verbatim.
    for key in py["aka"].as_object().unwrap().keys() {
        assert!(!rust.contains_key(key), "{key} is typed");
        let c: PerfCase = serde_json::from_value(serde_json::json!({
            "test_case_id": "a", "execution_time_ms": 1.0, key.clone(): {"shape": [4]}
        }))
        .unwrap();
        assert_eq!(c.extra[key], serde_json::json!({"shape": [4]}));
    }
    // A full case reads back typed: nothing of it lands in `extra`.
    let back: PerfCase =
        serde_json::from_value(serde_json::to_value(full_case()).unwrap()).unwrap();
    assert!(back.extra.is_empty(), "{:?}", back.extra);
    assert_eq!(back, full_case());
}

#[test]
fn record_checked_refuses_what_the_schema_does_not_have() {
    let full = serde_json::to_string(&full_case()).unwrap();
    let script = format!(
        r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import record
full = json.loads({full:?})
out = {{"full": sorted(record.checked(dict(full, params={{"shape": [1]}})))}}
for name, case in (
    ("unknown", dict(full, graph_errors={{}})),
    ("type", dict(full, cycles=1.5)),
    ("bool", dict(full, cycles=True)),
    ("none", dict(full, error=None)),
):
    try:
        record.checked(case)
        out[name] = "accepted"
    except ValueError as e:
        out[name] = str(e)
print(json.dumps(out))
"#
    );
    let v = evaluator_python(&script);
    assert!(v["full"].as_array().unwrap().len() > 10, "{v}");
    let said = |k: &str| v[k].as_str().unwrap().to_string();
    assert!(
        said("unknown").contains("key 'graph_errors' is not in the runner's schema"),
        "{v}"
    );
    assert!(
        said("type").contains("cycles is a float, the schema says integer"),
        "{v}"
    );
    assert!(said("bool").contains("cycles is a bool"), "{v}");
    assert!(said("none").contains("error is a NoneType"), "{v}");
}
