//! `evaluator.json`: what arena's own evaluator (trusted, evaluation.py) or gate runner
//! (self-reported, gates.py) writes beside its reports: why it could not evaluate, the device's
//! floor, its seed, warnings and times. The fields the runner acts on are typed here; the rest
//! is kept as written, for the task result.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cross_check::{FLOOR_MS, FLOOR_SHARE};

/// The record's file in an evaluator's report directory.
pub const FILE: &str = "evaluator.json";
/// Read at most this much of it (the evaluator's traceback tails are 4 000 characters).
pub const CAP: u64 = 1 << 20;

/// The parts of a trusted performance gate (`performance_parts_s`), in the order they come:
/// the evaluator's `perf_parts.PARTS`, the same list (tests/perf_parts.rs holds them equal).
pub const PERFORMANCE_PARTS: [&str; 9] = [
    "sessions", "sizing", "warmup", "inputs", "capture", "write", "window", "check", "other",
];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvaluatorRecord {
    /// Why the evaluator could not evaluate (a traceback's tail, or one line): the
    /// evaluation's own failure, never a kernel's gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The evaluation's secret seed (hex), told once no kernel process runs any more: with
    /// it anyone can make the inputs again and check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// A derived harness met a construct of the task's runner it cannot follow: the task is
    /// evaluated by its own commands instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_derivable: Option<String>,
    /// The device-floor probe's result (floor.py), where it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<FloorProbe>,
    /// Each kernel's device memory in bytes, measured by killing its processes where the
    /// device's memory ran out (memory_blame.py).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_held: Option<BTreeMap<String, u64>>,
    /// Seconds per gate of the trusted evaluator (`compile`, `correctness`, `performance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_s: Option<BTreeMap<String, f64>>,
    /// Seconds the trusted evaluator spent outside its gates, by phase (start, setup…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases_s: Option<BTreeMap<String, f64>>,
    /// Where the trusted evaluator's performance gate spent its seconds, by part, each
    /// exclusive of the others (perf_parts.py: sessions, sizing, warmup, inputs, capture,
    /// write, window, check, other).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_parts_s: Option<BTreeMap<String, f64>>,
    /// Seconds its timed batches read (inside the `window` part): the kernels' own work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_measured_s: Option<f64>,
    /// Every command the self-reported gate runner ran, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<StepRecord>>,
    /// The original compiled by torch.compile, where the task's harness declares it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled_baseline: Option<CompiledBaseline>,
    /// Everything else it wrote (seed, warnings, the runner's notes…).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// One command of a self-reported gate runner's step (gates.py).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The step it belongs to: `compile`, `correctness`, `performance`, or a paired run's
    /// `perf<round>-<role>`, `probe…`.
    #[serde(default)]
    pub step: String,
    /// Its wall seconds by arena's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// The torch.compile baseline's part of a trusted evaluator's record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompiledBaseline {
    /// Why it could not be compiled or run (the evaluation went on without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_s: Option<f64>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// floor.py's line: the cheapest call the device can honestly make.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FloorProbe {
    /// Why the probe could not measure (then nothing is checked against a floor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuFloor>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuFloor {
    /// The cheapest graph-replayed launch, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_launch_ms: Option<f64>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl FloorProbe {
    /// The floor a case's time must clear: on a GPU half the cheapest graph-replayed launch,
    /// else none (the CPU's [`FLOOR_MS`] applies).
    pub fn floor_ms(&self) -> Option<f64> {
        let graph = self
            .gpu
            .as_ref()?
            .graph_launch_ms
            .filter(|v| v.is_finite() && *v > 0.0)?;
        Some((graph * FLOOR_SHARE).max(FLOOR_MS))
    }
}

impl EvaluatorRecord {
    /// The record in `out`, read beneath it (a symlink out of it is not followed). `None` where
    /// there is none, or it does not hold a record (the evaluator ended before writing one).
    pub fn read(out: &Path) -> Option<EvaluatorRecord> {
        let text = crate::untrusted::read_text_beneath(out, Path::new(FILE), CAP).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The last line of [`EvaluatorRecord::error`]: a traceback's exception.
    pub fn failure(&self) -> Option<&str> {
        self.error
            .as_deref()
            .map(|e| e.trim_end().lines().last().unwrap_or(e))
    }

    /// Why the floor probe could not measure, where it ran and failed.
    pub fn floor_failure(&self) -> Option<&str> {
        self.floor.as_ref()?.error.as_deref()
    }

    /// The record as the task result keeps it (`evaluators`).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Adds `key` to what the record keeps (the runner's own notes: the paired plan, a warm
    /// evaluator's times).
    pub fn note(&mut self, key: &str, value: serde_json::Value) {
        self.extra.insert(key.to_string(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record reads into its typed fields and back to the same JSON; one whose typed field
    /// has the wrong type is no record.
    #[test]
    fn a_record_keeps_what_it_does_not_type_and_refuses_a_wrong_type() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"{"mode": "trusted", "seed": "ab", "error": "Traceback\n  ...\nRuntimeError: gone\n",
            "gate_s": {"compile": 1.5}, "phases_s": {}, "compiled_baseline": {"options": {"mode": "max-autotune"}, "compile_s": 3.0},
            "commands": [{"step": "perf1-candidate", "index": 0, "exit": 0, "wall_s": 0.5}],
            "floor": {"cpu_call_ms": 3e-5, "gpu": {"graph_launch_ms": 0.004, "n": 3}},
            "memory_held": {"baseline": 1073741824, "candidate": 66571993088}}"#;
        std::fs::write(dir.path().join(FILE), text).unwrap();
        let r = EvaluatorRecord::read(dir.path()).unwrap();
        assert_eq!(r.failure(), Some("RuntimeError: gone"));
        assert_eq!(
            r.floor.as_ref().unwrap().floor_ms(),
            Some(0.002f64.max(FLOOR_MS))
        );
        assert_eq!(r.memory_held.as_ref().unwrap()["candidate"], 66571993088);
        assert_eq!(r.gate_s.as_ref().unwrap()["compile"], 1.5);
        assert_eq!(r.phases_s, Some(BTreeMap::new()));
        let step = &r.commands.as_ref().unwrap()[0];
        assert_eq!(
            (step.step.as_str(), step.wall_s),
            ("perf1-candidate", Some(0.5))
        );
        assert_eq!(r.compiled_baseline.as_ref().unwrap().compile_s, Some(3.0));
        let back = r.to_value();
        let want: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(back, want);

        std::fs::write(dir.path().join(FILE), r#"{"error": 3}"#).unwrap();
        assert_eq!(EvaluatorRecord::read(dir.path()), None);
        std::fs::remove_file(dir.path().join(FILE)).unwrap();
        assert_eq!(EvaluatorRecord::read(dir.path()), None);
    }

    /// No GPU in the probe (or a nonsense time) is no floor; a failed probe says why.
    #[test]
    fn a_floor_comes_only_from_a_measured_launch() {
        let p: FloorProbe = serde_json::from_str(r#"{"cpu_call_ms": 3e-5, "gpu": null}"#).unwrap();
        assert_eq!(p.floor_ms(), None);
        let p: FloorProbe = serde_json::from_str(r#"{"gpu": {"graph_launch_ms": -1}}"#).unwrap();
        assert_eq!(p.floor_ms(), None);
        let r: EvaluatorRecord =
            serde_json::from_str(r#"{"floor": {"error": "no device"}}"#).unwrap();
        assert_eq!(r.floor_failure(), Some("no device"));
    }
}
