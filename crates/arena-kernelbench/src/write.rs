//! Writing a problem as a task directory, and importing a KernelBench tree.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::ImportError;
use crate::problem::{Problem, Skipped};

/// The task type of an imported problem.
pub const TASK_TYPE: &str = "kernelbench";

/// The part of every harness after its per-problem header.
const HARNESS_BODY: &str = include_str!("../template/task_runner.py");

const SOURCE: &str = "source/model_new.py";
const HARNESS: &str = "scripts/task_runner.py";

#[derive(Serialize)]
struct Prompt {
    source_code: Option<String>,
    instructions: String,
    cheatsheet: Option<String>,
}

/// config.yaml, in the field order AgentKernelArena writes.
#[derive(Serialize)]
struct Config {
    task_type: &'static str,
    source_file_path: Vec<&'static str>,
    target_kernel_functions: Vec<&'static str>,
    trusted_harness: &'static str,
    compile_command: Vec<String>,
    correctness_command: Vec<String>,
    performance_command: Vec<String>,
    task_result_template: Option<String>,
    prompt: Prompt,
    compile_timeout: u32,
    correctness_timeout: u32,
    performance_timeout: u32,
}

/// What an import made and left out.
#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    /// The tasks, sorted by id, each a directory below the output.
    pub tasks: Vec<ImportedProblem>,
    pub skipped: Vec<Skipped>,
}

/// One task made: its id and its visible configuration (the constants that size the inputs).
#[derive(Debug, Clone, Serialize)]
pub struct ImportedProblem {
    pub id: String,
    pub configuration: Vec<(String, i64)>,
}

fn reference_rel(p: &Problem) -> String {
    let file = p.rel.rsplit('/').next().unwrap_or(&p.rel);
    format!("reference/{file}")
}

fn config(p: &Problem) -> Config {
    let gate = |g: &str| vec![format!("python3 {HARNESS} {g}")];
    let instructions = format!(
        "KernelBench problem {id}. {reference} defines `Model`; write `ModelNew` in {SOURCE}: a \
         faster drop-in replacement (the same constructor arguments, forward inputs and outputs, \
         equal within atol and rtol 1e-2) that uses custom GPU kernels (Triton, CUDA through \
         torch.utils.cpp_extension.load_inline, ...). {SOURCE} starts as `Model` renamed, which is \
         the PyTorch eager baseline. Both models are built after torch.manual_seed(42) from \
         get_init_inputs(), so create parameters as `Model` does, in the same order. Inputs are \
         fresh for every call, and the evaluator also runs sizes you do not see. Check your work \
         with `python3 {HARNESS} compile|correctness|performance`.",
        id = p.id,
        reference = reference_rel(p),
    );
    Config {
        task_type: TASK_TYPE,
        source_file_path: vec![SOURCE],
        target_kernel_functions: vec!["ModelNew"],
        trusted_harness: HARNESS,
        compile_command: gate("compile"),
        correctness_command: gate("correctness"),
        performance_command: gate("performance"),
        task_result_template: None,
        prompt: Prompt {
            source_code: None,
            instructions,
            cheatsheet: None,
        },
        compile_timeout: 600,
        correctness_timeout: 600,
        performance_timeout: 900,
    }
}

fn harness(p: &Problem) -> String {
    // A JSON string is a valid Python string literal (its escapes are Python's too).
    let py = |s: &str| serde_json::to_string(s).expect("a string serializes");
    let embedded = py(&p.source);
    let fields: Vec<String> = p
        .shape_constants
        .iter()
        .map(|(k, v)| format!("{}: {v}", py(k)))
        .collect();
    let shapes = format!("    {{{}}},\n", fields.join(", "));
    format!(
        "#!/usr/bin/env python3\n\"\"\"Trusted harness of KernelBench problem {id} (written by \
         `arenactl task import kernelbench`).\n\nArena's trusted evaluator imports it for its \
         interface (SOURCE, ENTRY, TEST_SHAPES, make_inputs, reference, check, DEVICES) and runs \
         `ModelNew` in a process of its own; `python3 {HARNESS} compile|correctness|performance` \
         runs the gates in one process, for the agent's own checks.\n\"\"\"\n\
         PROBLEM = {problem_literal}\n\
         # The problem file as KernelBench has it (also at {problem}).\n\
         PROBLEM_SOURCE = {embedded}\n\
         SOURCE = {source_literal}\n\
         # The visible configuration: KernelBench's own sizes (the module constants get_inputs()\n\
         # reads). An unseen configuration sets other values for them.\n\
         TEST_SHAPES = [\n{shapes}]\n\n{HARNESS_BODY}",
        id = p.id,
        problem = reference_rel(p),
        problem_literal = py(&reference_rel(p)),
        source_literal = py(SOURCE),
    )
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ImportError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(ImportError::io(dir))?;
    }
    std::fs::write(path, bytes).map_err(ImportError::io(path))?;
    // Fixed modes: the task digest covers them, and a umask must not change it.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
        .map_err(ImportError::io(path))
}

/// Writes `p` as the task directory `dir` (which must not exist): into `dir.partial` first,
/// renamed when complete, so that a crash never leaves a half-written task under its id.
pub fn write_task(p: &Problem, dir: &Path) -> Result<(), ImportError> {
    let partial = PathBuf::from(format!("{}.partial", dir.display()));
    let _ = std::fs::remove_dir_all(&partial);
    let yaml = serde_norway::to_string(&config(p)).expect("the config serializes");
    write_file(&partial.join("config.yaml"), yaml.as_bytes())?;
    write_file(&partial.join(reference_rel(p)), p.source.as_bytes())?;
    write_file(&partial.join(SOURCE), p.model_new().as_bytes())?;
    write_file(&partial.join(HARNESS), harness(p).as_bytes())?;
    std::fs::rename(&partial, dir).map_err(ImportError::io(dir))
}

fn is_level(name: &str) -> bool {
    name.strip_prefix("level")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The problem files at or below `root`: `.py` files directly in a `level<N>` directory,
/// as (path, level directory name), sorted by path.
fn problem_files(root: &Path) -> Result<Vec<(PathBuf, String)>, ImportError> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let level = dir
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| is_level(n))
            .map(str::to_string);
        for entry in std::fs::read_dir(&dir).map_err(ImportError::io(&dir))? {
            let entry = entry.map_err(ImportError::io(&dir))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(ImportError::io(&path))?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && path.extension().is_some_and(|e| e == "py") {
                if let Some(level) = &level {
                    found.push((path, level.clone()));
                }
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Imports every problem at or below `from` into `out` (new or empty): one task directory per
/// problem, `out/<level>/<file stem>`. Files that are not problems are named in `skipped`.
pub fn import(from: &Path, out: &Path) -> Result<Imported, ImportError> {
    let files = problem_files(from)?;
    if files.is_empty() {
        return Err(ImportError::Empty(from.to_path_buf()));
    }
    if out.exists() {
        let mut entries = std::fs::read_dir(out).map_err(ImportError::io(out))?;
        if entries.next().is_some() {
            return Err(ImportError::OutNotEmpty(out.to_path_buf()));
        }
    }
    let mut problems: Vec<Problem> = Vec::new();
    let mut skipped = Vec::new();
    for (path, level) in files {
        let rel = path
            .strip_prefix(from)
            .unwrap_or(&path)
            .display()
            .to_string();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let id = format!("{level}/{stem}");
        let source = match std::fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(s) => s,
                Err(_) => {
                    skipped.push(Skipped {
                        file: rel,
                        reason: "is not UTF-8 text".into(),
                    });
                    continue;
                }
            },
            Err(e) => return Err(ImportError::io(&path)(e)),
        };
        if let Some(first) = problems.iter().find(|p| p.id == id) {
            return Err(ImportError::DuplicateId {
                id,
                first: first.rel.clone(),
                second: rel,
            });
        }
        match Problem::read(&rel, id, source) {
            Ok(p) => problems.push(p),
            Err(s) => skipped.push(s),
        }
    }
    std::fs::create_dir_all(out).map_err(ImportError::io(out))?;
    for p in &problems {
        write_task(p, &out.join(&p.id))?;
    }
    let mut tasks: Vec<ImportedProblem> = problems
        .into_iter()
        .map(|p| ImportedProblem {
            id: p.id,
            configuration: p.shape_constants,
        })
        .collect();
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(Imported { tasks, skipped })
}
