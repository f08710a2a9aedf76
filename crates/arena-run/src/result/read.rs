//! Reading task results: one result (its schema checked, v1 read as it was written), or a file
//! holding a result set, a list of results or one result.

use std::path::Path;

use super::{
    InfraError, TaskResult, RESULT_SET_SCHEMA, RESULT_SET_SCHEMA_V1, TASK_RESULT_SCHEMA,
    TASK_RESULT_SCHEMA_V1,
};
use crate::error::RunError;

/// Parses one task result, checking its schema (v1 is read as it was written).
pub fn parse_result(v: serde_json::Value) -> Result<TaskResult, String> {
    let schema = v
        .get("schema")
        .and_then(|s| s.as_str())
        .unwrap_or(TASK_RESULT_SCHEMA_V1)
        .to_string();
    if schema != TASK_RESULT_SCHEMA && schema != TASK_RESULT_SCHEMA_V1 {
        return Err(format!(
            "schema `{schema}` is not one this arena reads ({TASK_RESULT_SCHEMA}, {TASK_RESULT_SCHEMA_V1})"
        ));
    }
    let mut v = v;
    if let Some(m) = v.as_object_mut() {
        m.insert("schema".into(), serde_json::Value::String(schema));
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

/// Reads task results from a file holding a result set (`{"tasks": [...]}`), a list of task
/// results, or a single task result.
pub fn load_results(path: &Path) -> Result<Vec<TaskResult>, RunError> {
    Ok(load_results_with_run(path)?.0)
}

/// [`load_results`], with the run id a result set names.
pub fn load_results_with_run(path: &Path) -> Result<(Vec<TaskResult>, Option<String>), RunError> {
    let l = load_result_file(path)?;
    Ok((l.tasks, l.run_id))
}

/// What a results file holds: its task results, the run id and the task runs without a result
/// a result set names (a list of results or a single result names neither).
#[derive(Debug, Clone, Default)]
pub struct LoadedResults {
    pub tasks: Vec<TaskResult>,
    pub run_id: Option<String>,
    pub infra_errors: Vec<InfraError>,
}

/// Reads a file holding a result set (`{"tasks": [...]}`), a list of task results, or a single
/// task result, once.
pub fn load_result_file(path: &Path) -> Result<LoadedResults, RunError> {
    let text = std::fs::read_to_string(path).map_err(|e| RunError::io(path, e))?;
    let bad = |at: &str, m: String| RunError::invalid(path.display(), at, m);
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad("(json)", e.to_string()))?;
    let each = |items: Vec<serde_json::Value>, at: &str| {
        items
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse_result(v).map_err(|m| bad(&format!("{at}[{i}]"), m)))
            .collect::<Result<Vec<_>, _>>()
    };
    match value {
        serde_json::Value::Array(items) => Ok(LoadedResults {
            tasks: each(items, "")?,
            ..Default::default()
        }),
        serde_json::Value::Object(mut m) if m.contains_key("tasks") => {
            let run_id = m.get("run_id").and_then(|v| v.as_str()).map(str::to_string);
            // A set without a schema is read as the first one there was.
            let schema = m
                .get("schema")
                .and_then(|s| s.as_str())
                .unwrap_or(RESULT_SET_SCHEMA_V1);
            if schema != RESULT_SET_SCHEMA && schema != RESULT_SET_SCHEMA_V1 {
                return Err(bad(
                    "schema",
                    format!("`{schema}` is not a result set this arena reads ({RESULT_SET_SCHEMA}, {RESULT_SET_SCHEMA_V1})"),
                ));
            }
            let infra_errors = match m.remove("infra_errors") {
                None | Some(serde_json::Value::Null) => Vec::new(),
                Some(v) => {
                    serde_json::from_value(v).map_err(|e| bad("infra_errors", e.to_string()))?
                }
            };
            match m.remove("tasks") {
                Some(serde_json::Value::Array(items)) => Ok(LoadedResults {
                    tasks: each(items, "tasks")?,
                    run_id,
                    infra_errors,
                }),
                _ => Err(bad("tasks", "expected a list of task results".into())),
            }
        }
        v @ serde_json::Value::Object(_) => Ok(LoadedResults {
            tasks: vec![parse_result(v).map_err(|m| bad("(result)", m))?],
            ..Default::default()
        }),
        other => Err(bad(
            "(json)",
            format!(
                "expected a result set, a list of task results or one task result, found {}",
                match other {
                    serde_json::Value::Null => "null",
                    serde_json::Value::Bool(_) => "a boolean",
                    serde_json::Value::Number(_) => "a number",
                    _ => "a string",
                }
            ),
        )),
    }
}
