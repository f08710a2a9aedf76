//! The task result record: what one evaluation of one task in one run produced. The runner
//! writes it; scoring reads it. Unknown fields (digests, durations, logs) are kept verbatim.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::ReportError;

pub const TASK_RESULT_SCHEMA: &str = "arena.task_result/v1";
pub const RESULT_SET_SCHEMA: &str = "arena.results/v1";

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
}

impl Evaluation {
    pub fn compiled(&self) -> bool {
        self.compile.passed()
    }

    /// Correct means compiled and passing every shape.
    pub fn correct(&self) -> bool {
        self.compiled() && self.correctness.passed()
    }
}

/// The original and the agent's kernel evaluated on the same hidden unseen configurations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnseenResult {
    /// Digest of the sealed hidden set these shapes came from.
    pub set_digest: String,
    pub original: Evaluation,
    pub optimized: Evaluation,
    /// The agent's kernel: unseen configurations it fails, by category (edge_case,
    /// scale_up, …). Empty when it passes them all.
    #[serde(default)]
    pub failures_by_category: BTreeMap<String, u32>,
    /// The original kernel's failures on the same configurations, by category.
    #[serde(default)]
    pub original_failures_by_category: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    #[serde(default = "task_result_schema")]
    pub schema: String,
    pub task_id: String,
    pub task_type: String,
    /// Index of the repeated run (0 for the first).
    #[serde(default)]
    pub repeat: u32,
    /// The untouched sources, measured with the same commands in the same kind of container.
    pub baseline: Evaluation,
    /// The agent's sources.
    pub candidate: Evaluation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unseen: Option<UnseenResult>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

fn task_result_schema() -> String {
    TASK_RESULT_SCHEMA.to_string()
}

/// What `results.json` holds: every task result of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultSet {
    pub schema: String,
    #[serde(default)]
    pub run_id: Option<String>,
    pub tasks: Vec<TaskResult>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Reads task results from a file holding a result set (`{"tasks": [...]}`), a list of task
/// results, or a single task result.
pub fn load_results(path: &Path) -> Result<Vec<TaskResult>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| ReportError::Json {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let parse = |v: serde_json::Value, at: &str| -> Result<TaskResult, ReportError> {
        serde_json::from_value(v).map_err(|e| ReportError::Json {
            path: path.to_path_buf(),
            message: format!("{at}: {e}"),
        })
    };
    match value {
        serde_json::Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse(v, &format!("[{i}]")))
            .collect(),
        serde_json::Value::Object(ref m) if m.contains_key("tasks") => {
            let set: ResultSet = serde_json::from_value(value).map_err(|e| ReportError::Json {
                path: path.to_path_buf(),
                message: format!("tasks: {e}"),
            })?;
            Ok(set.tasks)
        }
        v @ serde_json::Value::Object(_) => Ok(vec![parse(v, "task result")?]),
        other => Err(ReportError::Json {
            path: path.to_path_buf(),
            message: format!(
                "expected a result set, a list of task results or one task result, found {}",
                match other {
                    serde_json::Value::Null => "null",
                    serde_json::Value::Bool(_) => "a boolean",
                    serde_json::Value::Number(_) => "a number",
                    _ => "a string",
                }
            ),
        }),
    }
}
