//! A typed reader over one YAML mapping that records an error naming file and field for every
//! value of the wrong shape, instead of stopping at the first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_norway::{Mapping, Value};

use crate::error::TaskError;

pub(crate) struct FieldReader {
    file: PathBuf,
    /// Prefix for nested maps (`prompt.`), empty at the top level.
    prefix: String,
    map: BTreeMap<String, Value>,
    pub(crate) errors: Vec<TaskError>,
}

/// How YAML names a value's kind in our messages ("found a number").
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a map",
        Value::Tagged(_) => "a tagged value",
    }
}

impl FieldReader {
    pub(crate) fn new(file: &Path, prefix: &str, mapping: Mapping) -> Self {
        let mut errors = Vec::new();
        let mut map = BTreeMap::new();
        for (k, v) in mapping {
            match k {
                Value::String(s) => {
                    map.insert(s, v);
                }
                other => errors.push(TaskError::field(
                    file,
                    format!("{prefix}{}", render_key(&other)),
                    format!("keys must be strings, found {}", kind_of(&other)),
                )),
            }
        }
        FieldReader {
            file: file.to_path_buf(),
            prefix: prefix.to_string(),
            map,
            errors,
        }
    }

    fn name(&self, field: &str) -> String {
        format!("{}{}", self.prefix, field)
    }

    fn fail(&mut self, field: &str, message: impl Into<String>) {
        let e = TaskError::field(&self.file, self.name(field), message);
        self.errors.push(e);
    }

    /// Takes a field out of the map; `None` for absent. An explicit `null` counts as absent,
    /// because AgentKernelArena writes `task_result_template: null` for "not set".
    fn take(&mut self, field: &str) -> Option<Value> {
        match self.map.remove(field) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    pub(crate) fn has(&self, field: &str) -> bool {
        matches!(self.map.get(field), Some(v) if !v.is_null())
    }

    pub(crate) fn required_string(&mut self, field: &str) -> Option<String> {
        if !self.has(field) {
            self.fail(field, "required field is missing");
            return None;
        }
        self.string(field)
    }

    pub(crate) fn string(&mut self, field: &str) -> Option<String> {
        match self.take(field)? {
            Value::String(s) => Some(s),
            other => {
                self.fail(
                    field,
                    format!("expected a string, found {}", kind_of(&other)),
                );
                None
            }
        }
    }

    /// A required, non-empty list of strings (the command lists).
    pub(crate) fn required_string_list(&mut self, field: &str) -> Vec<String> {
        if !self.has(field) {
            self.fail(field, "required field is missing");
            return Vec::new();
        }
        let list = self.string_list(field);
        if list.is_empty()
            && !self
                .errors
                .iter()
                .any(|e| names_field(e, &self.name(field)))
        {
            self.fail(field, "expected at least one entry, found an empty list");
        }
        list
    }

    pub(crate) fn string_list(&mut self, field: &str) -> Vec<String> {
        let Some(v) = self.take(field) else {
            return Vec::new();
        };
        let Value::Sequence(items) = v else {
            self.fail(
                field,
                format!("expected a list of strings, found {}", kind_of(&v)),
            );
            return Vec::new();
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            match item {
                Value::String(s) => out.push(s),
                other => self.fail(
                    &format!("{field}[{i}]"),
                    format!("expected a string, found {}", kind_of(&other)),
                ),
            }
        }
        out
    }

    /// A list of strings where AgentKernelArena sometimes writes a single string.
    pub(crate) fn string_or_list(&mut self, field: &str) -> Vec<String> {
        if let Some(Value::String(_)) = self.map.get(field) {
            return self.string(field).into_iter().collect();
        }
        self.string_list(field)
    }

    /// A positive number of seconds.
    pub(crate) fn positive_seconds(&mut self, field: &str) -> Option<f64> {
        let v = self.take(field)?;
        match v.as_f64() {
            Some(x) if x > 0.0 && x.is_finite() => Some(x),
            Some(x) => {
                self.fail(
                    field,
                    format!("expected a positive number of seconds, found {x}"),
                );
                None
            }
            None => {
                self.fail(
                    field,
                    format!("expected a number of seconds, found {}", kind_of(&v)),
                );
                None
            }
        }
    }

    /// A size: a number of bytes, or a string such as `16GiB` or `512 MiB`.
    pub(crate) fn bytes(&mut self, field: &str) -> Option<u64> {
        let v = self.take(field)?;
        let parsed = match &v {
            Value::Number(n) => n
                .as_u64()
                .ok_or_else(|| format!("{n} is not a whole number of bytes")),
            Value::String(s) => s
                .parse::<bytesize::ByteSize>()
                .map(|b| b.as_u64())
                .map_err(|e| format!("`{s}`: {e} (write e.g. 16GiB)")),
            other => Err(format!(
                "expected a size such as 16GiB, found {}",
                kind_of(other)
            )),
        };
        match parsed {
            Ok(0) => {
                self.fail(field, "must be more than 0 bytes");
                None
            }
            Ok(b) => Some(b),
            Err(why) => {
                self.fail(field, why);
                None
            }
        }
    }

    pub(crate) fn mapping(&mut self, field: &str) -> Option<Mapping> {
        match self.take(field)? {
            Value::Mapping(m) => Some(m),
            other => {
                self.fail(field, format!("expected a map, found {}", kind_of(&other)));
                None
            }
        }
    }

    /// Any value, kept as JSON (fields whose shape varies between tasks).
    pub(crate) fn any(&mut self, field: &str) -> Option<serde_json::Value> {
        let v = self.take(field)?;
        match yaml_to_json(&v) {
            Ok(j) => Some(j),
            Err(msg) => {
                self.fail(field, msg);
                None
            }
        }
    }

    /// What is left: the fields this reader does not know. Kept, and reported as warnings.
    pub(crate) fn rest(&mut self) -> BTreeMap<String, serde_json::Value> {
        let keys: Vec<String> = self.map.keys().cloned().collect();
        let mut out = BTreeMap::new();
        for k in keys {
            let v = self.map.remove(&k).unwrap_or(Value::Null);
            match yaml_to_json(&v) {
                Ok(j) => {
                    out.insert(k, j);
                }
                Err(msg) => self.fail(&k, msg),
            }
        }
        out
    }

    pub(crate) fn file(&self) -> &Path {
        &self.file
    }
}

fn names_field(e: &TaskError, field: &str) -> bool {
    matches!(e, TaskError::Field { field: f, .. } if f == field || f.starts_with(&format!("{field}[")))
}

fn render_key(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => format!("<{}>", kind_of(v)),
    }
}

pub(crate) fn yaml_to_json(v: &Value) -> Result<serde_json::Value, String> {
    serde_json::to_value(v).map_err(|e| format!("cannot be represented as JSON: {e}"))
}
