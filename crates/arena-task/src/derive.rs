//! Trusted harnesses derived from an AgentKernelArena task's own runner, and the trust a run
//! gives each task.
//!
//! AgentKernelArena's Triton task runners are regular: `run_correctness()` walks a module-level
//! list (`for i, shape in enumerate(TEST_SHAPES):`), seeds torch, builds inputs, calls one
//! function of the module `load_module()` gives and compares its output with a reference.
//! arena's evaluator runs that function itself, with the kernel's module replaced by a
//! stand-in that hands each call to the jailed kernel process (the evaluator's `derived.py`).
//! This module reads a runner, without running Python, for the form the evaluator follows,
//! and writes the two-line `arena_harness.py` that points the evaluator at it. What the text
//! cannot tell (arguments that are not tensors or plain values, comparisons of a part of the
//! output the evaluator does not follow) the evaluator finds and names when it loads the
//! harness.

use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Serialize;

use crate::harness_overlay::HARNESS_FILE;
use crate::TaskConfig;

/// The first line of a derived `arena_harness.py`: how a derived harness is told from a
/// hand-written one.
pub const DERIVED_MARKER: &str = "# arena: trusted harness derived from the task's runner";

/// Task types whose kernels are Triton, run on an NVIDIA GPU by arena.
const TRITON_TYPES: &[&str] = &["triton2triton", "instruction2triton"];

/// A runner the evaluator can follow: what the derived harness names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Derivation {
    /// The runner, relative to the task.
    pub runner: String,
    /// The kernel's file, relative to the task.
    pub source: String,
    /// The function of the kernel's module the runner calls.
    pub entry: String,
    /// The module-level list `run_correctness()` walks: the visible configurations.
    pub cases: String,
}

/// Why a task's runner cannot be followed: the file, and the construct in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}: {construct}", file.display())]
pub struct NotDerivable {
    pub file: PathBuf,
    pub construct: String,
}

fn nd(file: &Path, construct: impl Into<String>) -> NotDerivable {
    NotDerivable {
        file: file.to_path_buf(),
        construct: construct.into(),
    }
}

/// The runner `dir`'s task checks its kernel with, where the evaluator can follow it.
pub fn derive(dir: &Path, config: &TaskConfig) -> Result<Derivation, NotDerivable> {
    let config_file = dir.join(crate::CONFIG_FILE);
    let kind = config.task_type.0.as_str();
    if !TRITON_TYPES.contains(&kind) {
        return Err(nd(
            &config_file,
            format!(
                "task_type {kind}: derived harnesses are for Triton tasks ({})",
                TRITON_TYPES.join(", ")
            ),
        ));
    }
    // The words of the first correctness command: the runner it runs (or pytest's file).
    let words = config
        .correctness_command
        .first()
        .and_then(|c| shlex::split(c))
        .unwrap_or_default();
    let py_file = words.iter().find(|w| w.ends_with(".py")).cloned();
    if words
        .iter()
        .any(|w| w == "pytest" || w.ends_with("/pytest"))
    {
        return Err(nd(
            &dir.join(py_file.unwrap_or_default()),
            "its tests run under pytest (correctness_command); derived harnesses follow a runner's run_correctness() (vLLM's form), not pytest tests",
        ));
    }
    let [source] = config.source_file_path.as_slice() else {
        return Err(nd(
            &config_file,
            format!(
                "source_file_path names {} files; a derived harness times one kernel file",
                config.source_file_path.len()
            ),
        ));
    };
    let runner = py_file.ok_or_else(|| {
        nd(&config_file, "correctness_command runs no Python file (`python3 scripts/task_runner.py correctness`)")
    })?;
    let path = dir.join(&runner);
    let text =
        std::fs::read_to_string(&path).map_err(|e| nd(&path, format!("cannot be read: {e}")))?;
    let (entry, cases) = read_runner(&path, &text)?;
    Ok(Derivation {
        runner,
        source: source.clone(),
        entry,
        cases,
    })
}

/// The entry and the list of configurations of a runner's `run_correctness()`.
fn read_runner(path: &Path, text: &str) -> Result<(String, String), NotDerivable> {
    for (pattern, what) in [
        (
            r"\bnp\.random\.|\bnumpy\.random\b",
            "numpy's random numbers",
        ),
        (r"(^|[^.\w])random\.\w+\(", "Python's random module"),
        (r"\btorch\.Generator\b", "a torch.Generator"),
    ] {
        if Regex::new(pattern).unwrap().is_match(text) {
            return Err(nd(
                path,
                format!("draws inputs from {what}, which arena cannot seed (it seeds torch.manual_seed)"),
            ));
        }
    }
    if !Regex::new(r"(?m)^def load_module\(")
        .unwrap()
        .is_match(text)
    {
        return Err(nd(path, "defines no load_module() at module level"));
    }
    let body = function_body(text, "run_correctness")
        .ok_or_else(|| nd(path, "defines no run_correctness() at module level"))?;
    let first_for = Regex::new(r"(?m)^\s+for\s+(.+?)\s+in\s+(.+?)\s*:\s*$").unwrap();
    let cases = first_for
        .captures(body)
        .and_then(|c| {
            let it = c.get(2)?.as_str();
            Regex::new(r"^enumerate\((\w+)\)$")
                .unwrap()
                .captures(it)
                .map(|m| m[1].to_string())
        })
        .ok_or_else(|| {
            nd(path, "run_correctness's first loop is not `for … in enumerate(NAME):` over a module-level list")
        })?;
    if !Regex::new(&format!(r"(?m)^{}\s*=\s*\[", regex::escape(&cases)))
        .unwrap()
        .is_match(text)
    {
        return Err(nd(
            path,
            format!("{cases}, which run_correctness walks, is not a list literal at module level"),
        ));
    }
    let module_var = Regex::new(r"\b(\w+)\s*=\s*load_module\(\)")
        .unwrap()
        .captures(body)
        .map(|c| c[1].to_string())
        .ok_or_else(|| {
            nd(
                path,
                "run_correctness does not assign load_module()'s module to a name",
            )
        })?;
    let call = Regex::new(&format!(
        r"\b{}\.([A-Za-z]\w*)\s*\(",
        regex::escape(&module_var)
    ))
    .unwrap();
    let called: Vec<String> = call.captures_iter(body).map(|c| c[1].to_string()).collect();
    let mut entries = called.clone();
    entries.sort();
    entries.dedup();
    let entry = match entries.as_slice() {
        [one] => one.clone(),
        [] => return Err(nd(path, format!("run_correctness calls no public function of `{module_var}`"))),
        many => {
            return Err(nd(
                path,
                format!("run_correctness calls {} public functions of `{module_var}` ({}); a derived harness times one", many.len(), many.join(", ")),
            ))
        }
    };
    let calls = called.iter().filter(|c| **c == entry).count();
    if calls > 1 {
        return Err(nd(
            path,
            format!("run_correctness calls {entry} {calls} times per configuration; a derived harness times one call"),
        ));
    }
    if text.contains(".data_ptr()") {
        return Err(nd(
            path,
            "the runner passes raw device pointers (`.data_ptr()`): the memory the kernel writes is not among its arguments",
        ));
    }
    if !Regex::new(r"\b(allclose|equal|assert_close)\(")
        .unwrap()
        .is_match(body)
    {
        return Err(nd(
            path,
            "run_correctness compares with none of torch.allclose, torch.equal, torch.testing.assert_close",
        ));
    }
    Ok((entry, cases))
}

/// The text of module-level function `name`: from its `def` up to the next line that starts
/// at column 0 (the next top-level statement).
fn function_body<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let start = Regex::new(&format!(r"(?m)^def {}\(", regex::escape(name)))
        .unwrap()
        .find(text)?
        .start();
    let rest = &text[start..];
    let first_line_end = rest.find('\n').map(|i| i + 1).unwrap_or(rest.len());
    let end = Regex::new(r"(?m)^[^\s#]")
        .unwrap()
        .find(&rest[first_line_end..])
        .map(|m| first_line_end + m.start())
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The text of a derived `arena_harness.py`.
pub fn harness_text(d: &Derivation) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("a string serializes");
    format!(
        "{DERIVED_MARKER} ({}): the evaluator runs the runner's\n\
         # run_correctness itself, the kernel's calls handed to the jailed kernel process\n\
         # (arena_trusted/derived.py). Written by `arenactl task materialize`.\n\
         import derived\n\n\
         derived.from_runner(globals(), runner={}, source={}, entry={}, cases={})\n",
        d.runner,
        q(&d.runner),
        q(&d.source),
        q(&d.entry),
        q(&d.cases)
    )
}

/// Which harness judges a task's kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessKind {
    /// Derived from the task's own runner (`derive`).
    Derived,
    /// Written for the task by arena (tasks/aka-harnesses).
    Arena,
    /// The task's own (KernelBench imports name their runner).
    Task,
}

impl HarnessKind {
    /// Its name, as `--json` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            HarnessKind::Derived => "derived",
            HarnessKind::Arena => "arena",
            HarnessKind::Task => "task",
        }
    }
}

/// The trust a run gives a task: `trusted` (arena's evaluator times it from outside) with the
/// harness that judges it, or `self_reported` and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrustLevel {
    pub level: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harness: Option<HarnessKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The trust a run of the task in `dir` gets.
pub fn trust_of(dir: &Path, config: &TaskConfig) -> TrustLevel {
    if let Some(h) = &config.trusted_harness {
        let kind = if h == HARNESS_FILE {
            let text = std::fs::read_to_string(dir.join(h)).unwrap_or_default();
            if text.starts_with(DERIVED_MARKER) {
                HarnessKind::Derived
            } else {
                HarnessKind::Arena
            }
        } else {
            HarnessKind::Task
        };
        return TrustLevel {
            level: "trusted",
            harness: Some(kind),
            reason: None,
        };
    }
    let reason = match derive(dir, config) {
        Ok(d) => format!(
            "no trusted harness in this copy; `arenactl task materialize` derives one from {}",
            d.runner
        ),
        Err(e) => e.to_string(),
    };
    TrustLevel {
        level: "self_reported",
        harness: None,
        reason: Some(reason),
    }
}

#[cfg(test)]
#[path = "derive_tests.rs"]
mod tests;
