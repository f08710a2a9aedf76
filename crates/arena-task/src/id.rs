//! Task ids: the path of a task directory below its tasks root, `/`-separated
//! (`triton2triton/vllm/triton_bincount`). Checked once, when made or read, so that an id can
//! be joined to a directory, used in a container name or a file name without escaping it.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaskId(String);

/// Why a string is not a task id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("task id `{id}`: {reason}")]
pub struct BadTaskId {
    pub id: String,
    pub reason: &'static str,
}

impl TaskId {
    pub fn new(s: impl Into<String>) -> Result<TaskId, BadTaskId> {
        let s = s.into();
        let bad = |reason| BadTaskId {
            id: s.clone(),
            reason,
        };
        if s.is_empty() || s.len() > 512 {
            return Err(bad("must be 1 to 512 bytes"));
        }
        if s.chars().any(|c| c.is_control() || c == '\\') {
            return Err(bad("must not hold control characters or backslashes"));
        }
        if s.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(bad(
                "must be a relative path of plain names (no leading `/`, `.`, `..` or empty part)",
            ));
        }
        Ok(TaskId(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as one file name: `/` becomes `__` (`a__b__c`).
    pub fn flat(&self) -> String {
        self.0.replace('/', "__")
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for TaskId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for TaskId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<std::path::Path> for TaskId {
    fn as_ref(&self) -> &std::path::Path {
        std::path::Path::new(&self.0)
    }
}

impl Borrow<str> for TaskId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TaskId {
    type Error = BadTaskId;
    fn try_from(s: String) -> Result<TaskId, BadTaskId> {
        TaskId::new(s)
    }
}

impl TryFrom<&str> for TaskId {
    type Error = BadTaskId;
    fn try_from(s: &str) -> Result<TaskId, BadTaskId> {
        TaskId::new(s)
    }
}

impl From<TaskId> for String {
    fn from(t: TaskId) -> String {
        t.0
    }
}

impl PartialEq<str> for TaskId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for TaskId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for TaskId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_plain_relative_paths() {
        let id = TaskId::new("triton2triton/vllm/triton_bincount").unwrap();
        assert_eq!(id.flat(), "triton2triton__vllm__triton_bincount");
        assert_eq!(id, "triton2triton/vllm/triton_bincount");
        for bad in ["", "/abs", "a//b", "a/../b", "./a", "a/", "a\\b", "a\nb"] {
            let e = TaskId::new(bad).unwrap_err();
            assert!(e.to_string().contains("task id"), "{bad}: {e}");
        }
        let e = serde_json::from_str::<TaskId>("\"../x\"").unwrap_err();
        assert!(e.to_string().contains("plain names"), "{e}");
    }
}
