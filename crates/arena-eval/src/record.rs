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
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
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
            extra: BTreeMap::new(),
        }
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
