//! The ways a task declares its visible shapes (TASK-FORMAT.md), read without running Python
//! and rewritten in a private copy of the file:
//! - a module-level `TEST_SHAPES = [...]` literal (vllm task runners; [`crate::shapes`]);
//! - `@pytest.mark.parametrize("M, N", [...])` lists (rocmbench test files);
//! - the module-level integer constants `get_inputs()` builds its tensors from (gpumode /
//!   KernelBench modules: `batch_size = 16` … `torch.randn(batch_size, dim)`);
//! - a literal list `get_inputs()` walks from a local name ([`local`]; gpumode activations).
//!
//! The first two hold every configuration in one list; `get_inputs()` describes exactly one,
//! so an unseen set for it is evaluated one configuration per rewritten copy.

use std::fmt;

use crate::shapes::{read_decl, rewrite_source, Parser, ShapeError, Value};

/// Which declaration of a file holds the shapes (the `declaration` of a sealed task file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declaration {
    /// `NAME = [...]` at module level.
    Assign(String),
    /// The parametrize decorator with these argument names (`"M, N"`, normalized).
    Parametrize(String),
    /// The integer constants `get_inputs()` uses.
    GetInputs,
    /// A literal list of shapes `get_inputs()` holds in a local name ([`local`]).
    Local(String),
    /// The integer sizes an input function assigns at the top of its body ([`fn_locals`]):
    /// `gen_inputs():locals`.
    FnLocals(String),
}

impl Declaration {
    /// Reads the form written by [`fmt::Display`]: `TEST_SHAPES`, `parametrize(M, N)`,
    /// `get_inputs()`.
    pub fn parse(s: &str) -> Declaration {
        if s == "get_inputs()" {
            Declaration::GetInputs
        } else if let Some(func) = s.strip_suffix(fn_locals::SUFFIX) {
            Declaration::FnLocals(func.to_string())
        } else if let Some(name) = s.strip_prefix("get_inputs().") {
            Declaration::Local(name.to_string())
        } else if let Some(args) = s
            .strip_prefix("parametrize(")
            .and_then(|r| r.strip_suffix(')'))
        {
            Declaration::Parametrize(normalize_argnames(args))
        } else {
            Declaration::Assign(s.to_string())
        }
    }

    /// Whether one rewritten file holds a single configuration (so each is evaluated alone).
    pub fn one_config_per_file(&self) -> bool {
        matches!(self, Declaration::GetInputs | Declaration::FnLocals(_))
    }
}

impl fmt::Display for Declaration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Declaration::Assign(n) => write!(f, "{n}"),
            Declaration::Parametrize(a) => write!(f, "parametrize({a})"),
            Declaration::GetInputs => write!(f, "get_inputs()"),
            Declaration::Local(n) => write!(f, "get_inputs().{n}"),
            Declaration::FnLocals(func) => write!(f, "{func}{}", fn_locals::SUFFIX),
        }
    }
}

fn normalize_argnames(s: &str) -> String {
    s.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The visible entries of `decl` in `src` (for `get_inputs()`, one tuple of the constants).
pub fn visible_entries(src: &str, decl: &Declaration) -> Result<Vec<Value>, ShapeError> {
    match decl {
        Declaration::Assign(name) => Ok(labelled::with_companions(
            src,
            name,
            read_decl(src, name)?.entries,
        )),
        Declaration::Parametrize(args) => group_entries(src, args),
        Declaration::GetInputs => Ok(vec![read_get_inputs(src)?.entry()]),
        Declaration::Local(name) => Ok(read_local(src, name)?.entries),
        Declaration::FnLocals(func) => Ok(vec![fn_locals::read_fn_locals(src, func)?.entry()]),
    }
}

/// The local list of `get_inputs()`, which must be held in `name`.
fn read_local(src: &str, name: &str) -> Result<crate::shapes::ShapeDecl, ShapeError> {
    let d = local::read_local_list(src)?;
    if d.name != name {
        return Err(ShapeError::GetInputs {
            line: d.line,
            message: format!("holds its shapes in `{}`, not `{name}`", d.name),
        });
    }
    Ok(d)
}

/// `src` with the declaration's shapes replaced by `entries` (Python source, as in a sealed
/// set). `get_inputs()` takes exactly one entry: a tuple with one integer per constant.
pub fn rewrite(src: &str, decl: &Declaration, entries: &[String]) -> Result<String, ShapeError> {
    match decl {
        Declaration::Assign(name) => {
            // The list, then each labelled companion of it (labelled), in the text as it
            // stands after the last rewrite.
            let decl = read_decl(src, name)?;
            let companions: Vec<String> = decl
                .entries
                .first()
                .map(|t| labelled::companions(src, name, t))
                .unwrap_or_default()
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            let mut out = rewrite_source(src, &decl, entries);
            let pairs = labelled::labelled_entries(entries);
            for n in &companions {
                out = rewrite_source(&out, &read_decl(&out, n)?, &pairs);
            }
            Ok(out)
        }
        Declaration::Parametrize(args) => {
            // Every decorator of the group, from the last, so earlier spans stay valid.
            let mut group = parametrize_group(src, args);
            if group.is_empty() {
                group.push(read_parametrize(src, Some(args))?);
            }
            group.sort_by_key(|d| std::cmp::Reverse(d.decl.span.0));
            let mut out = src.to_string();
            for d in group {
                out = rewrite_source(&out, &d.decl, entries);
            }
            Ok(out)
        }
        Declaration::GetInputs => {
            let [entry] = entries else {
                return Err(ShapeError::GetInputs {
                    line: 0,
                    message: format!("describes one configuration; {} were given", entries.len()),
                });
            };
            rewrite_get_inputs(src, &read_get_inputs(src)?, entry)
        }
        Declaration::Local(name) => Ok(rewrite_source(src, &read_local(src, name)?, entries)),
        Declaration::FnLocals(func) => {
            let d = fn_locals::read_fn_locals(src, func)?;
            let [entry] = entries else {
                return Err(ShapeError::GetInputs {
                    line: d.line,
                    message: format!("describes one configuration; {} were given", entries.len()),
                });
            };
            rewrite_get_inputs(src, &d, entry)
        }
    }
}

/// One module-level integer constant that `get_inputs()` uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputConstant {
    pub name: String,
    pub value: i64,
    /// Byte range of the integer literal.
    pub span: (usize, usize),
    pub line: usize,
}

/// The constants of `get_inputs()`, in the order the function first uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetInputsDecl {
    pub constants: Vec<InputConstant>,
    /// 1-based line of `def get_inputs`.
    pub line: usize,
}

impl GetInputsDecl {
    /// The one configuration it describes: a tuple with one integer per constant.
    pub fn entry(&self) -> Value {
        Value::Tuple(self.constants.iter().map(|c| Value::Int(c.value)).collect())
    }
}

/// The variable names `code` uses: not attribute names (`x.dim`), keyword argument names
/// (`dim=1`), or anything inside strings and comments.
fn identifiers(code: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_str: Option<char> = None;
    let mut start: Option<usize> = None;
    let chars: Vec<(usize, char)> = code.char_indices().collect();
    let mut words: Vec<(usize, usize)> = Vec::new();
    for &(i, c) in &chars {
        if let Some(q) = in_str {
            if c == q {
                in_str = None;
            }
            continue;
        }
        let ident = c.is_alphanumeric() || c == '_';
        match (start, ident) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                words.push((s, i));
                start = None;
            }
            _ => {}
        }
        if c == '"' || c == '\'' {
            in_str = Some(c);
        } else if c == '#' {
            start = None;
            break;
        }
    }
    if let Some(s) = start {
        words.push((s, code.len()));
    }
    for (s, e) in words {
        let w = &code[s..e];
        let attribute = code[..s].trim_end().ends_with('.');
        let after = code[e..].trim_start();
        let keyword = after.starts_with('=') && !after.starts_with("==");
        let number = w.starts_with(|c: char| c.is_ascii_digit());
        if !attribute && !keyword && !number {
            out.push(w);
        }
    }
    out
}

/// Reads `def get_inputs()` and the module-level `NAME = <int>` constants its body uses.
pub fn read_get_inputs(src: &str) -> Result<GetInputsDecl, ShapeError> {
    let mut offset = 0;
    let mut def_line = None;
    let mut body: Vec<&str> = Vec::new();
    let mut constants: Vec<InputConstant> = Vec::new();
    let mut computed: Vec<(String, usize)> = Vec::new();
    let mut in_body = false;
    for (i, line) in src.split_inclusive('\n').enumerate() {
        let line_no = i + 1;
        let starts_indented = line.starts_with([' ', '\t']);
        if in_body {
            if starts_indented || line.trim().is_empty() {
                let code = line.split('#').next().unwrap_or("");
                body.push(code);
                offset += line.len();
                continue;
            }
            in_body = false;
        }
        if line.starts_with("def get_inputs(") {
            def_line = Some(line_no);
            in_body = true;
        } else if !starts_indented {
            // `NAME = value` at module level.
            let (lhs, rhs) = match line.split_once('=') {
                Some((l, r)) if !r.starts_with('=') && !l.ends_with(['=', '!', '<', '>']) => {
                    (l.trim(), r)
                }
                _ => {
                    offset += line.len();
                    continue;
                }
            };
            if !lhs.is_empty() && lhs.chars().all(|c| c.is_alphanumeric() || c == '_') {
                let value_start = offset + line.len() - rhs.len();
                let mut p = Parser::at(src, value_start, "get_inputs");
                p.skip();
                let start = p.pos;
                let tail_ok = |end: usize| {
                    let tail: String = src[end..].chars().take_while(|c| *c != '\n').collect();
                    let tail = tail.trim();
                    tail.is_empty() || tail.starts_with('#')
                };
                match p.value() {
                    Ok(Value::Int(v)) if tail_ok(p.pos) => {
                        constants.retain(|c| c.name != lhs);
                        constants.push(InputConstant {
                            name: lhs.to_string(),
                            value: v,
                            span: (start, p.pos),
                            line: line_no,
                        });
                    }
                    _ => {
                        constants.retain(|c| c.name != lhs);
                        computed.retain(|(n, _)| n != lhs);
                        computed.push((lhs.to_string(), line_no));
                    }
                }
            }
        }
        offset += line.len();
    }
    let line = def_line.ok_or(ShapeError::NoGetInputs)?;
    let mut used: Vec<InputConstant> = Vec::new();
    for code in &body {
        for w in identifiers(code) {
            if used.iter().any(|c| c.name == w) {
                continue;
            }
            if let Some(c) = constants.iter().find(|c| c.name == w) {
                used.push(c.clone());
            }
        }
    }
    if used.is_empty() {
        let names: Vec<&str> = computed
            .iter()
            .filter(|(n, _)| body.iter().any(|b| identifiers(b).contains(&n.as_str())))
            .map(|(n, _)| n.as_str())
            .collect();
        return Err(ShapeError::GetInputs {
            line,
            message: if names.is_empty() {
                "uses no module-level integer constant; shapes written inside the calls are not read"
                    .into()
            } else {
                format!(
                    "uses only computed module-level values ({}); computed shapes cannot be read or replaced",
                    names.join(", ")
                )
            },
        });
    }
    Ok(GetInputsDecl {
        constants: used,
        line,
    })
}

/// The names `def get_init_inputs()` uses (module constants that size the weights: kept
/// when an unseen configuration varies the inputs).
pub fn init_input_names(src: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_body = false;
    for line in src.lines() {
        let body_line = line.starts_with([' ', '\t']) || line.trim().is_empty();
        if in_body && body_line {
            for w in identifiers(line.split('#').next().unwrap_or("")) {
                if !out.iter().any(|o| o == w) {
                    out.push(w.to_string());
                }
            }
            continue;
        }
        in_body = line.starts_with("def get_init_inputs(");
    }
    out
}

/// `src` with each constant of `decl` set from `entry` (a tuple, one integer per constant).
pub fn rewrite_get_inputs(
    src: &str,
    decl: &GetInputsDecl,
    entry: &str,
) -> Result<String, ShapeError> {
    let mut p = Parser::at(entry, 0, "entry");
    let values: Vec<i64> = match p.value()? {
        Value::Tuple(xs) | Value::List(xs) => xs.iter().filter_map(Value::as_int).collect(),
        Value::Int(i) => vec![i],
        _ => Vec::new(),
    };
    if values.len() != decl.constants.len() {
        let names: Vec<&str> = decl.constants.iter().map(|c| c.name.as_str()).collect();
        return Err(ShapeError::GetInputs {
            line: decl.line,
            message: format!(
                "uses {} constants ({}); the entry {entry} gives {} integers",
                names.len(),
                names.join(", "),
                values.len()
            ),
        });
    }
    let mut slots: Vec<(&InputConstant, i64)> = decl.constants.iter().zip(values).collect();
    slots.sort_by_key(|(c, _)| std::cmp::Reverse(c.span.0));
    let mut out = src.to_string();
    for (c, v) in slots {
        out.replace_range(c.span.0..c.span.1, &v.to_string());
    }
    Ok(out)
}

pub mod fn_locals;
pub mod labelled;
pub mod local;
mod parametrize;
pub(crate) use parametrize::{group_entries, has_int};
pub use parametrize::{
    parametrize_decorators, parametrize_group, read_parametrize, ParametrizeDecl,
};
#[cfg(test)]
mod tests;
