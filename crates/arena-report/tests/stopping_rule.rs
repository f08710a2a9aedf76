//! The trusted evaluator stops taking pairs when the speedup's interval is narrow enough
//! (arena-eval's trusted/arena_trusted/stopping.py). That interval must be the one reports then
//! give, or an evaluation could stop on an interval no report shows: the evaluator's session
//! ratios and median interval are held equal to `stats::session_ratios` and
//! `stats::median_interval` here, and its stop decision is checked at its edges.

use std::process::Command;

use arena_eval::record::{PairedBy, PerfCase};
use arena_report::stats::{median_interval, session_ratios};
use serde_json::{json, Value};

fn stopping_python(script: &str, input: &Value) -> Value {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../arena-eval/trusted/arena_trusted"
    );
    let o = Command::new("python3")
        .args(["-I", "-B", "-c", script, dir, &input.to_string()])
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

fn case(pairs: &[[f64; 2]], sessions: &[u64]) -> PerfCase {
    let mut c: PerfCase = serde_json::from_value(json!({
        "test_case_id": "perf1", "execution_time_ms": 1.0,
    }))
    .unwrap();
    c.pairing.pairs_ms = Some(pairs.to_vec());
    c.pairing.paired_by = Some(PairedBy::Session);
    c.pairing.pair_sessions = Some(sessions.to_vec());
    c
}

/// Deterministic times: `n` sessions of `per` pairs for `cases` cases, spread by `spread`.
fn plan(cases: usize, n: u64, per: usize, spread: f64) -> Vec<(Vec<[f64; 2]>, Vec<u64>)> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 10_000) as f64 / 10_000.0 - 0.5
    };
    (0..cases)
        .map(|c| {
            let mut pairs = Vec::new();
            let mut sessions = Vec::new();
            for s in 0..n {
                for _ in 0..per {
                    let base = 2.0 + c as f64;
                    pairs.push([base * (1.0 + spread * next()), base / 1.5]);
                    sessions.push(s);
                }
            }
            (pairs, sessions)
        })
        .collect()
}

const SAME: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import stopping
out = []
for cases in json.loads(sys.argv[2]):
    r = stopping.session_ratios([([tuple(p) for p in pairs], sessions) for pairs, sessions in cases])
    out.append({"ratios": r, "interval": list(stopping.median_interval(r))})
print(json.dumps(out))
"#;

#[test]
fn the_evaluators_interval_is_the_one_reports_give() {
    let plans: Vec<_> = [
        (1, 5, 1, 0.01),
        (3, 5, 1, 0.2),
        (4, 7, 2, 0.05),
        (2, 10, 1, 0.3),
    ]
    .into_iter()
    .map(|(c, n, per, spread)| plan(c, n, per, spread))
    .collect();
    let py = stopping_python(SAME, &json!(plans));
    for (i, p) in plans.iter().enumerate() {
        let cases: Vec<PerfCase> = p.iter().map(|(pairs, s)| case(pairs, s)).collect();
        let ratios = session_ratios(&cases).expect("session ratios");
        let (lo, hi) = median_interval(&ratios, 0.95);
        let got: Vec<f64> = serde_json::from_value(py[i]["ratios"].clone()).unwrap();
        assert_eq!(got.len(), ratios.len(), "plan {i}");
        for (a, b) in got.iter().zip(&ratios) {
            assert!((a - b).abs() < 1e-12, "plan {i}: {got:?} vs {ratios:?}");
        }
        let iv = &py[i]["interval"];
        assert!((iv[0].as_f64().unwrap() - lo).abs() < 1e-12, "plan {i}");
        assert!((iv[1].as_f64().unwrap() - hi).abs() < 1e-12, "plan {i}");
    }
}

const DECIDE: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import stopping
out = {}
for name, (ratios, least, most, target) in json.loads(sys.argv[2]).items():
    out[name] = list(stopping.decide(ratios, least, most, target))
print(json.dumps(out))
"#;

#[test]
fn it_stops_when_narrow_from_the_least_sessions_and_at_the_cap() {
    let steady = [1.50, 1.501, 1.499, 1.5005, 1.4995];
    let v = stopping_python(
        DECIDE,
        &json!({
            // Narrow, but before the least sessions: more are taken.
            "early": [&steady[..4], 5, 10, 0.02],
            "narrow": [steady, 5, 10, 0.02],
            // 1.40 to 1.60 is 13 % of 1.5: wider than 2 %, so on to the cap.
            "wide": [[1.4, 1.6, 1.5, 1.45, 1.55], 5, 10, 0.02],
            "cap": [[1.4, 1.6, 1.5, 1.45, 1.55, 1.4, 1.6, 1.5, 1.45, 1.55], 5, 10, 0.02],
            "failed": [null, 5, 10, 0.02],
        }),
    );
    assert_eq!(v["early"][0], false, "{v}");
    assert_eq!(v["narrow"][0], true, "{v}");
    assert_eq!(v["narrow"][1], "narrow", "{v}");
    assert!(v["narrow"][2].as_f64().unwrap() < 0.002, "{v}");
    assert_eq!(v["wide"][0], false, "{v}");
    assert!(
        (v["wide"][2].as_f64().unwrap() - 0.2 / 1.5).abs() < 1e-9,
        "{v}"
    );
    assert_eq!(v["cap"][0], true, "{v}");
    assert_eq!(v["cap"][1], "cap", "{v}");
    assert_eq!(v["failed"][1], "failed", "{v}");
}
