//! Where a task declares its visible shapes. The files its commands run come first (the
//! harness the evaluator really executes), then the task's other Python files. Forms, in
//! this order (TASK-FORMAT.md): a module-level literal list under a shapes-like name
//! (`TEST_SHAPES`, `ALL_SHAPES`, `EVAL_CONFIGS`, `CASES`, …; lists derived from it follow it),
//! parametrize lists (literal, a comprehension over a literal, or a name bound to one), and
//! `get_inputs()`. A declaration found only in a file the agent edits is refused by name: the
//! agent would choose its own unseen configurations.

use regex::Regex;

use super::{DECLARATION, DEFAULT_HARNESS, NO_DECLARATION};
use crate::declarations::{
    init_input_names, parametrize_decorators, read_get_inputs, read_parametrize, visible_entries,
    Declaration,
};
use crate::shapes::{module_lists, read_decl, ShapeError, Value};
use crate::task::Task;
use crate::unseen::Hints;

/// Where a task declares its visible shapes: the file (relative to the task), the
/// declaration, its visible entries, further files declaring the same (`get_inputs()` in
/// both of a gpumode task's PyTorch files), and the names the code gives the components.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundDeclaration {
    pub file: String,
    pub declaration: Declaration,
    pub entries: Vec<Value>,
    pub also: Vec<String>,
    pub hints: Hints,
}

/// Why no declaration could be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotFound {
    /// No form arena reads is there.
    None(String),
    /// A declaration is there but cannot be read or rewritten.
    Unreadable(String),
    /// The only declaration is in a file the agent edits.
    AgentOwned(String),
}

/// Whether `name` names a list of shapes (`TEST_SHAPES`, `ALL_SHAPES`, `EVAL_CONFIGS`,
/// `CASES`, `SIZES`…).
fn shapes_like(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["SHAPES", "CONFIGS", "CASES", "SIZES"]
        .iter()
        .any(|w| n == *w || n.ends_with(&format!("_{w}")) || n.contains(&format!("{w}_")))
}

/// The task's `.py` files its commands name (`python3 test_kernel_harness.py`, `pytest x.py`,
/// `--py_modu_file m.py`), in command order, then `harness_path`, each once.
pub fn command_files(task: &Task) -> Vec<String> {
    let c = &task.config;
    let mut out = crate::split::command_py_files(&task.dir, c);
    let harness = c
        .harness_path
        .clone()
        .unwrap_or_else(|| DEFAULT_HARNESS.to_string());
    if task.dir.join(&harness).is_file() && !out.contains(&harness) {
        out.push(harness);
    }
    out
}

/// The names of `for b, d1, d2 in [...]` whose literal starts at `at`.
fn loop_names_before(src: &str, at: usize) -> Vec<String> {
    let line_start = src[..at].rfind('\n').map_or(0, |i| i + 1);
    let re = Regex::new(r"for\s+\(?\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*\)?\s+in\s*$")
        .expect("a valid pattern");
    re.captures(&src[line_start..at])
        .map(|c| c[1].split(',').map(|n| n.trim().to_string()).collect())
        .unwrap_or_default()
}

/// The names a loop unpacks each entry of `list` into (`for i, (M, N, K) in
/// enumerate(TEST_SHAPES)` → M, N, K).
fn unpacked_names(src: &str, list: &str) -> Vec<String> {
    let pattern = format!(
        r"for\s+(?:\w+\s*,\s*)?\(?\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)+)\s*\)?\s+in\s+(?:enumerate\(\s*)?{}\b",
        regex::escape(list)
    );
    let re = Regex::new(&pattern).expect("a valid pattern");
    re.captures(src)
        .map(|c| c[1].split(',').map(|n| n.trim().to_string()).collect())
        .unwrap_or_default()
}

fn has_int(v: &Value) -> bool {
    crate::declarations::has_int(v)
        || matches!(v, Value::Dict(items) if items.iter().any(|(_, x)| has_int(x)))
}

/// The module-level literal list of shapes in `src`, if there is one to use: `TEST_SHAPES`
/// first, else the only shapes-like literal list holding integers. Two independent ones
/// (correctness and performance lists) are refused: rewriting one would leave the other
/// visible.
fn named_list(src: &str) -> Result<Option<(String, Vec<Value>)>, String> {
    match read_decl(src, DECLARATION) {
        Ok(d) => return Ok(Some((DECLARATION.into(), d.entries))),
        Err(ShapeError::NotFound(_)) => {}
        Err(e) => return Err(e.to_string()),
    }
    let lists: Vec<_> = module_lists(src)
        .into_iter()
        .filter(|(name, entries)| shapes_like(name) && entries.iter().any(has_int))
        .collect();
    match lists.as_slice() {
        [] => Ok(None),
        [(name, entries)] => Ok(Some((name.clone(), entries.clone()))),
        more => {
            let names: Vec<&str> = more.iter().map(|(n, _)| n.as_str()).collect();
            Err(format!(
                "declares its shapes in {} independent lists ({}); rewriting one would leave \
                 the others' visible shapes checked or timed",
                names.len(),
                names.join(", ")
            ))
        }
    }
}

/// The declaration of one file: a named list, else a parametrize list, else nothing here.
fn in_file(src: &str, rel: &str) -> Result<Option<FoundDeclaration>, String> {
    if read_decl(src, DECLARATION).is_err()
        && parametrize_decorators(src)
            .iter()
            .any(|d| d.as_ref().map_or(true, |d| d.entries.iter().any(has_int)))
    {
        return parametrize(src, rel).map(Some);
    }
    if let Some((name, entries)) = named_list(src)? {
        // A labelled list of the same configurations (image_kernel's PERF_CASES) holds visible
        // configurations too, and is rewritten alike (declarations::labelled).
        let entries = crate::declarations::labelled::with_companions(src, &name, entries);
        return Ok(Some(FoundDeclaration {
            file: rel.into(),
            hints: Hints {
                names: unpacked_names(src, &name),
                fixed: Vec::new(),
            },
            declaration: Declaration::Assign(name),
            entries,
            also: Vec::new(),
        }));
    }
    Ok(None)
}

/// The parametrize group of the first decorator whose values hold integers (a correctness
/// and a performance test declaring the same shapes are rewritten alike).
fn parametrize(src: &str, rel: &str) -> Result<FoundDeclaration, String> {
    let d = read_parametrize(src, None).map_err(|e| e.to_string())?;
    let declaration = Declaration::Parametrize(d.argnames.clone());
    Ok(FoundDeclaration {
        file: rel.into(),
        hints: Hints {
            names: d.argnames.split(", ").map(str::to_string).collect(),
            fixed: Vec::new(),
        },
        entries: visible_entries(src, &declaration).map_err(|e| e.to_string())?,
        declaration,
        also: Vec::new(),
    })
}

/// Every file with a `get_inputs()` must declare the same (a gpumode task's functional and
/// module files are rewritten alike): the constants it uses, or its local list.
fn get_inputs(files: &[(String, String)]) -> Result<Option<FoundDeclaration>, String> {
    let mut found: Option<(FoundDeclaration, String)> = None;
    for (rel, src) in files {
        // A literal list `get_inputs()` walks is the declaration even where the body also
        // uses a module constant (KernelBench's `features`, fixed by get_init_inputs()).
        let (declaration, key, hints) = match crate::declarations::local::read_local_list(src) {
            Ok(l) => {
                let shown: Vec<String> = l.entries.iter().map(Value::to_python).collect();
                let key = format!("`{}` = [{}]", l.name, shown.join(", "));
                let hints = Hints {
                    names: loop_names_before(src, l.span.0),
                    fixed: init_input_names(src),
                };
                (Declaration::Local(l.name), key, hints)
            }
            Err(_) => match read_get_inputs(src) {
                Ok(d) => {
                    let names: Vec<String> = d.constants.iter().map(|c| c.name.clone()).collect();
                    let fixed = init_input_names(src);
                    (
                        Declaration::GetInputs,
                        names.join(", "),
                        Hints { names, fixed },
                    )
                }
                Err(ShapeError::NoGetInputs) => continue,
                Err(e) => return Err(format!("{rel}: {e}")),
            },
        };
        match &mut found {
            None => {
                let entries =
                    visible_entries(src, &declaration).map_err(|e| format!("{rel}: {e}"))?;
                let f = FoundDeclaration {
                    file: rel.clone(),
                    declaration,
                    entries,
                    also: Vec::new(),
                    hints,
                };
                found = Some((f, key));
            }
            Some((f, first)) if *first == key && f.declaration == declaration => {
                // The constants' sizes a second file's get_init_inputs() fixes are fixed too.
                if declaration == Declaration::GetInputs {
                    f.hints.fixed.extend(hints.fixed);
                }
                f.also.push(rel.clone())
            }
            Some((f, first)) => {
                return Err(format!(
                    "{} and {}: get_inputs() declares different shapes ({first} vs {key}); \
                     both files would have to be rewritten alike",
                    f.file, rel,
                ))
            }
        }
    }
    Ok(found.map(|(f, _)| f))
}

/// The first declaration of `files` (relative path, source), in the order of the forms.
fn search(files: &[(String, String)]) -> Result<Option<FoundDeclaration>, String> {
    for (rel, src) in files {
        if let Some(f) = in_file(src, rel).map_err(|e| format!("{rel}: {e}"))? {
            return Ok(Some(f));
        }
    }
    if let Some(f) = get_inputs(files)? {
        return Ok(Some(f));
    }
    Ok(fn_locals(files))
}

/// The integer sizes an input function assigns at the top of its body, in the first file
/// that has one (vLLM's fla tasks: `T, D = 512, 128` in `gen_inputs()`).
fn fn_locals(files: &[(String, String)]) -> Option<FoundDeclaration> {
    files.iter().find_map(|(rel, src)| {
        let (func, d) = crate::declarations::fn_locals::find_fn_locals(src)?;
        Some(FoundDeclaration {
            file: rel.clone(),
            declaration: Declaration::FnLocals(func),
            entries: vec![d.entry()],
            also: Vec::new(),
            hints: Hints {
                names: d.constants.iter().map(|c| c.name.clone()).collect(),
                fixed: init_input_names(src),
            },
        })
    })
}

/// Finds the task's shape declaration (module docs).
pub fn find_declaration(task: &Task) -> Result<FoundDeclaration, NotFound> {
    let sources: Vec<String> = task
        .agent_files
        .iter()
        .map(|s| s.trim_start_matches("./").to_string())
        .collect();
    let read = |rel: &String| -> Result<(String, String), NotFound> {
        let p = task.dir.join(rel);
        std::fs::read_to_string(&p)
            .map(|s| (rel.clone(), s))
            .map_err(|e| NotFound::Unreadable(format!("{}: {e}", p.display())))
    };
    let mut ordered = command_files(task);
    let mut rest: Vec<String> = crate::task_tree(&task.dir)
        .map_err(|e| NotFound::Unreadable(e.to_string()))?
        .into_iter()
        .filter(|e| matches!(e.kind, crate::EntryKind::File { .. }))
        .map(|e| e.rel)
        .filter(|rel| rel.ends_with(".py") && !ordered.contains(rel))
        .collect();
    rest.sort();
    ordered.extend(rest);
    // The tests of a file split into kernel and tests are the task's, whoever edits the
    // kernel (crate::split): a declaration there is read (and rewritten there alone).
    let mut ours = Vec::new();
    let mut agent = Vec::new();
    for rel in ordered {
        if !sources.contains(&rel) {
            ours.push(read(&rel)?);
            continue;
        }
        // An agent file is read once; one that cannot be read fails only if the task's own
        // files declare nothing (as before the split).
        match read(&rel) {
            Ok((rel, text)) => match crate::split::harness_part(&text) {
                Some(tests) => ours.push((rel, tests.to_string())),
                None => agent.push(Ok((rel, text))),
            },
            Err(e) => agent.push(Err(e)),
        }
    }
    let at = |e: String| NotFound::Unreadable(format!("{}/{e}", task.dir.display()));
    if let Some(f) = search(&ours).map_err(at)? {
        return Ok(f);
    }
    let agent = agent.into_iter().collect::<Result<Vec<_>, _>>()?;
    for (rel, src) in &agent {
        let declared = named_list(src).map(|l| l.is_some()).unwrap_or(true)
            || !parametrize_decorators(src).is_empty()
            || read_get_inputs(src).is_ok();
        if declared {
            return Err(NotFound::AgentOwned(format!(
                "{}/{rel}: the shapes are declared in a file the agent edits; \
                 the agent would choose its own unseen configurations",
                task.dir.display()
            )));
        }
    }
    Err(NotFound::None(format!(
        "{NO_DECLARATION}: no shapes-like list (`{DECLARATION}`, `ALL_SHAPES`, `*_CONFIGS`, \
         `*_CASES` = [...]), `@pytest.mark.parametrize` list, `def get_inputs()`, or integer \
         sizes at the top of an input function (`gen_inputs`, `make_inputs`) in {}",
        if ours.is_empty() {
            "any Python file of the task".to_string()
        } else {
            ours.iter()
                .map(|(r, _)| r.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    )))
}
