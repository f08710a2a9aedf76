//! What one evaluation produced: each gate's report (the harness's `build/*_report.json`
//! convention) and the performance cases. The evaluation of a task run's baseline, of the
//! agent's kernel and of both on unseen configurations all take this shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateStatus {
    Ok,
    Fail,
    /// Not run because an earlier gate failed.
    Skipped,
}

/// A harness's `build/compile_report.json` or `build/correctness_report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateReport {
    pub status: GateStatus,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl GateReport {
    pub fn passed(&self) -> bool {
        self.status == GateStatus::Ok
    }

    pub fn new(status: GateStatus, error: Option<String>) -> Self {
        GateReport {
            status,
            error,
            extra: BTreeMap::new(),
        }
    }
}

/// One entry of `build/performance_report.json`. `execution_time_ms <= 0` marks a failed case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfCase {
    pub test_case_id: String,
    pub execution_time_ms: f64,
    /// The case's paired timing, where arena measured one (its keys sit beside the others in
    /// the JSON).
    #[serde(flatten)]
    pub pairing: Pairing,
    /// How arena measured the case (its keys sit beside the others in the JSON too).
    #[serde(flatten)]
    pub measured: Measured,
    /// Why the case failed, where its writer said (arena's evaluator always does; a harness
    /// may). A harness's value that is not text is kept as its JSON.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text_or_json"
    )]
    pub error: Option<String>,
    /// The report's other keys (a harness's own, kept verbatim).
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// A case's paired timing (and a simulated task's cycles), written only by arena: its
/// trusted evaluator (measure.py, simulated.py,
/// `Session.performance`) or the rounds of a paired self-reported evaluation
/// (crate::paired). A task harness's report that holds these keys has them dropped
/// (crate::aka_perf::ARENA_KEYS), so that no kernel hands the scorer its own "paired"
/// baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pairing {
    /// The original kernel's time per call, the median of its batches beside this case's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_ms: Option<f64>,
    /// Each pair's (original, candidate) time per call, in the order measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs_ms: Option<Vec<[f64; 2]>>,
    /// What the pairs were measured in: the samples of the case's interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_by: Option<PairedBy>,
    /// Which session each pair came from (`paired_by: session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_sessions: Option<Vec<u64>>,
    /// Where the trusted evaluator stopped taking pairs, and why (a stop width set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<PerfStop>,
    /// The original compiled by torch.compile, timed in the same pairs (KernelBench's second
    /// baseline): its time per call, and each pair's (compiled, candidate) times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled_pairs_ms: Option<Vec<[f64; 2]>>,
    /// Why the compiled original has no time on this case (its process did not start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled_error: Option<String>,
    /// A simulated task's cycles (arena_trusted/simulated.py): the judged kernel's, and the
    /// original's beside it. `execution_time_ms` is the same count at the simulator's
    /// nominal clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_cycles: Option<u64>,
}

/// How arena measured a case: the judged kernel's batches, their size and their clock. Written
/// only by arena (its trusted evaluator, a paired self-reported evaluation), and dropped from a
/// task harness's report as [`Pairing`]'s keys are. The Python evaluator checks every case it
/// writes against the same keys and types (arena_trusted/record.py; a test holds the two
/// equal).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The judged kernel's time per call in each timed batch, in the order measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_ms: Option<Vec<f64>>,
    /// Calls in each timed batch, by role (sized to the evaluator's target batch time; the
    /// two kernels of a pair take the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_batch: Option<BTreeMap<String, u64>>,
    /// How each kernel's batches were timed, by role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<BTreeMap<String, TimingMode>>,
    /// Why a kernel's batches could not be captured as a CUDA graph, by role: they were timed
    /// eagerly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_error: Option<BTreeMap<String, String>>,
    /// How the case was measured, in words (shown in reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// How a kernel's timed batches ran on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimingMode {
    /// A CUDA graph of the batch's calls, captured once and replayed.
    Graph,
    /// The calls launched one after another (a kernel that cannot be captured; the CPU).
    Eager,
}

/// Where the trusted evaluator stopped taking sessions of pairs (arena_trusted/stopping.py):
/// the same for every case of an evaluation, since the interval is over the sessions of all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfStop {
    /// Sessions taken, one pair each.
    pub sessions: u32,
    /// The fewest and the most it would take.
    pub least: u32,
    pub most: u32,
    /// The widest interval, as a fraction of the median speedup, that stops it early.
    pub target: f64,
    /// The interval's width when it stopped (none with fewer than two sessions).
    pub width: Option<f64>,
    pub reason: StopReason,
}

/// Why the trusted evaluator stopped taking pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    /// The interval was no wider than the target.
    Narrow,
    /// The most sessions were taken, the interval still wider than the target.
    Cap,
    /// No case was left to time (they failed).
    Failed,
}

/// What a case's pairs were measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PairedBy {
    /// Rounds of a paired self-reported evaluation: pair `i` of every case came from the
    /// same two processes.
    Round,
    /// Sessions of fresh kernel processes of the trusted evaluator.
    Session,
}

/// A case's `error` as text: a string as it is, null as none, anything else as its JSON (a
/// harness's report is not refused for the type of its error).
fn text_or_json<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(error_text(serde_json::Value::deserialize(d)?))
}

/// [`PerfCase::error`] from a report's value.
pub fn error_text(v: serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s),
        other => Some(other.to_string()),
    }
}

/// A case time that counts as a measurement: positive and finite (harnesses mark a failed
/// case with `-1.0`).
pub fn is_measured(ms: f64) -> bool {
    ms > 0.0 && ms.is_finite()
}

impl PerfCase {
    pub fn measured(&self) -> bool {
        is_measured(self.execution_time_ms)
    }

    pub fn new(id: &str, ms: f64) -> Self {
        PerfCase {
            test_case_id: id.to_string(),
            execution_time_ms: ms,
            pairing: Pairing::default(),
            measured: Measured::default(),
            error: None,
            extra: BTreeMap::new(),
        }
    }

    /// The case with arena's pairing keys, where `extra` holds them (a report read key by
    /// key), moved into `pairing`: read by the one schema, as results.json is.
    pub fn typed(self) -> Result<Self, serde_json::Error> {
        serde_json::from_value(serde_json::to_value(&self)?)
    }
}

/// The gates of one evaluation (baseline or candidate), in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub compile: GateReport,
    pub correctness: GateReport,
    /// Empty when the performance gate was not reached.
    #[serde(default)]
    pub performance: Vec<PerfCase>,
    /// Why the performance gate failed, where it did for a reason its cases do not show (a
    /// command that exited non-zero, a round never reached, no report found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_error: Option<String>,
    /// Where the harness's cases were read (`build/performance_report.json`, `output:
    /// GEAK_RESULT_LATENCY_MS`, …), for a self-reported harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_source: Option<String>,
    /// The least a call can take on the evaluator's device (measured there at the start): a
    /// case reported below it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_floor_ms: Option<f64>,
    /// What Triton's autotuner chose in each performance run, where a kernel autotuned (a
    /// paired self-reported evaluation; [`crate::autotune`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autotuning: Option<crate::autotune::Autotuning>,
}

impl Evaluation {
    /// An evaluation of two gate reports and its cases, nothing else recorded.
    pub fn new(compile: GateReport, correctness: GateReport, performance: Vec<PerfCase>) -> Self {
        Evaluation {
            compile,
            correctness,
            performance,
            performance_error: None,
            performance_source: None,
            device_floor_ms: None,
            autotuning: None,
        }
    }

    pub fn compiled(&self) -> bool {
        self.compile.passed()
    }

    /// Correct means compiled and passing every shape.
    pub fn correct(&self) -> bool {
        self.compiled() && self.correctness.passed()
    }

    /// The first gate that failed, with its error: `compile: …` or `correctness: …`.
    pub fn failed_gate(&self) -> Option<String> {
        let (gate, report) = if !self.compiled() {
            ("compile", &self.compile)
        } else if !self.correctness.passed() {
            ("correctness", &self.correctness)
        } else {
            return None;
        };
        Some(format!(
            "{gate}: {}",
            report.error.as_deref().unwrap_or("failed")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A case's pairing keys are read by their schema and written back as they came, beside
    /// the harness's own keys; a case read key by key (`typed`) ends the same.
    #[test]
    fn a_cases_pairing_is_typed_and_round_trips() {
        let text = r#"{"test_case_id":"perf1","execution_time_ms":1.5,"baseline_ms":3.0,
            "pairs_ms":[[3.0,1.5],[3.1,1.4]],"paired_by":"session","pair_sessions":[0,1],
            "params":{"n":4}}"#;
        let c: PerfCase = serde_json::from_str(text).unwrap();
        assert_eq!(c.pairing.baseline_ms, Some(3.0));
        assert_eq!(c.pairing.pairs_ms, Some(vec![[3.0, 1.5], [3.1, 1.4]]));
        assert_eq!(c.pairing.paired_by, Some(PairedBy::Session));
        assert_eq!(c.pairing.pair_sessions, Some(vec![0, 1]));
        assert_eq!(c.extra.keys().collect::<Vec<_>>(), ["params"]);
        let back = serde_json::to_value(&c).unwrap();
        let orig: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(back, orig);

        let mut loose = PerfCase::new("perf1", 1.5);
        for (k, v) in orig.as_object().unwrap() {
            if k != "test_case_id" && k != "execution_time_ms" {
                loose.extra.insert(k.clone(), v.clone());
            }
        }
        assert_eq!(loose.typed().unwrap(), c);
        // A pairing key of the wrong kind is refused, never read as no pairing.
        loose = PerfCase::new("perf1", 1.5);
        loose.extra.insert("paired_by".into(), "whim".into());
        assert!(loose.typed().is_err());
    }
}
