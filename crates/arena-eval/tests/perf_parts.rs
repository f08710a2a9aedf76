//! Where a trusted performance gate's seconds go (the evaluator's perf_parts.py): each second is
//! charged to the innermost part under way, an untimed batch's parts to its caller's, the
//! parts are the list the Rust side reads (`PERFORMANCE_PARTS`), and a part not in it is
//! refused.

mod common;

use arena_eval::evaluator_record::PERFORMANCE_PARTS;
use common::evaluator_python;

const SCRIPT: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import perf_parts

now = [0.0]
def clock():
    return now[0]
def spend(s):
    now[0] += s

p = perf_parts.Parts(clock)
with p.part("other"):
    spend(1.0)
    with p.part("sessions"):
        spend(2.0)
    with p.part("sizing"):
        spend(0.5)
        # An untimed batch inside sizing: its inputs and window are sizing's.
        with p.timed("inputs", False):
            spend(4.0)
        with p.timed("window", False):
            spend(8.0)
    # A timed batch: its parts are named.
    with p.timed("inputs", True):
        spend(16.0)
    with p.timed("window", True):
        spend(32.0)
        p.add_measured(0.25)
    spend(64.0)
refused = None
try:
    with p.part("lunch"):
        pass
except ValueError as e:
    refused = str(e)
print(json.dumps({"parts": list(perf_parts.PARTS), "record": p.record(), "measured": p.measured, "refused": refused}))
"#;

#[test]
fn seconds_go_to_the_innermost_part_and_the_parts_are_the_runners_list() {
    let v = evaluator_python(SCRIPT);
    assert_eq!(v["parts"], serde_json::json!(PERFORMANCE_PARTS));
    let r = &v["record"];
    assert_eq!(r["other"], 65.0, "{v}");
    assert_eq!(r["sessions"], 2.0, "{v}");
    assert_eq!(r["sizing"], 12.5, "an untimed batch is its caller's: {v}");
    assert_eq!(r["inputs"], 16.0, "{v}");
    assert_eq!(r["window"], 32.0, "{v}");
    assert_eq!(r["check"], 0.0, "every part named, 0 where none went: {v}");
    assert_eq!(v["measured"], 0.25);
    assert!(v["refused"].as_str().unwrap().contains("lunch"), "{v}");
}
