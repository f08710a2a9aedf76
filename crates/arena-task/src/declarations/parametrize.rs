//! `@pytest.mark.parametrize` shape lists (rocmbench test files): each decorator read as a
//! literal, a comprehension over one, or a name bound to a module-level literal list; and the
//! group of decorators that declare the same shapes (a correctness and a performance test),
//! read and rewritten together.

use super::normalize_argnames;
use crate::shapes::{read_decl, Parser, ShapeError, Value};

/// A parametrize decorator whose value list is a literal.
#[derive(Debug, Clone, PartialEq)]
pub struct ParametrizeDecl {
    /// Normalized argument names (`"M, N"`).
    pub argnames: String,
    pub entries: Vec<Value>,
    pub decl: crate::shapes::ShapeDecl,
}

pub(crate) fn has_int(v: &Value) -> bool {
    match v {
        Value::Int(_) => true,
        Value::Tuple(xs) | Value::List(xs) => xs.iter().any(has_int),
        _ => false,
    }
}

/// Every `@pytest.mark.parametrize(...)` of `src`, in order, each read or refused.
pub fn parametrize_decorators(src: &str) -> Vec<Result<ParametrizeDecl, ShapeError>> {
    const NEEDLE: &str = "pytest.mark.parametrize";
    let mut out = Vec::new();
    let mut offset = 0;
    for line in src.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix('@') {
            if rest.trim_start().starts_with(NEEDLE) {
                let at = offset + line.len() - rest.trim_start().len() + NEEDLE.len();
                out.push(read_one_parametrize(src, at));
            }
        }
        offset += line.len();
    }
    out
}

fn keyword<'a>(p: &mut Parser<'a>, kw: &str) {
    let save = p.pos;
    p.skip();
    let rest = &p.src[p.pos..];
    if let Some(r) = rest.strip_prefix(kw) {
        if r.trim_start().starts_with('=') && !r.trim_start().starts_with("==") {
            p.pos += kw.len();
            p.skip();
            p.pos += 1; // '='
            return;
        }
    }
    p.pos = save;
}

fn read_one_parametrize(src: &str, at: usize) -> Result<ParametrizeDecl, ShapeError> {
    let mut p = Parser::at(src, at, "parametrize");
    p.skip();
    if p.peek() != Some('(') {
        return Err(p.not_literal("a decorator without arguments"));
    }
    p.pos += 1;
    keyword(&mut p, "argnames");
    let argnames = match p.value()? {
        Value::Str(s) => normalize_argnames(&s),
        Value::List(xs) | Value::Tuple(xs) => {
            let names: Option<Vec<String>> = xs
                .iter()
                .map(|x| match x {
                    Value::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect();
            names
                .map(|n| n.join(", "))
                .ok_or_else(|| p.not_literal("argument names that are not strings"))?
        }
        _ => return Err(p.not_literal("argument names that are not strings")),
    };
    p.skip();
    if p.peek() != Some(',') {
        return Err(p.not_literal("no value list after the argument names"));
    }
    p.pos += 1;
    keyword(&mut p, "argvalues");
    p.skip();
    let start = p.pos;
    let line = p.line();
    // A name bound to a module-level literal list: that list is the declaration.
    let ident: String = src[start..]
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if !ident.is_empty() && !ident.starts_with(|c: char| c.is_ascii_digit()) {
        if let Ok(d) = read_decl(src, &ident) {
            return Ok(ParametrizeDecl {
                argnames,
                entries: d.entries.clone(),
                decl: d,
            });
        }
    }
    if p.peek() != Some('[') {
        let what: String = src[start..]
            .chars()
            .take_while(|c| *c != '\n' && *c != ')')
            .take(40)
            .collect();
        return Err(ShapeError::NotLiteral {
            name: format!("parametrize({argnames})"),
            line,
            what: format!("`{}`", what.trim()),
        });
    }
    let name = format!("parametrize({argnames})");
    p.name = "parametrize";
    let v = p.value().map_err(|e| match e {
        ShapeError::NotLiteral { line, what, .. } => ShapeError::NotLiteral {
            name: name.clone(),
            line,
            what,
        },
        e => e,
    })?;
    let end = p.pos;
    let Value::List(entries) = v else {
        unreachable!("starts with [")
    };
    Ok(ParametrizeDecl {
        argnames: argnames.clone(),
        entries: entries.clone(),
        decl: crate::shapes::ShapeDecl {
            name,
            entries,
            span: (start, end),
            line,
        },
    })
}

/// The parametrize decorator named by `argnames`, or (with `None`) the first whose values
/// hold integers: the shapes, not the dtypes or flags other decorators list.
pub fn read_parametrize(src: &str, argnames: Option<&str>) -> Result<ParametrizeDecl, ShapeError> {
    let all = parametrize_decorators(src);
    let want = argnames.map(normalize_argnames);
    let mut first_err = None;
    for d in all {
        match d {
            Ok(d) => match &want {
                Some(w) if &d.argnames == w => return Ok(d),
                Some(_) => {}
                None if d.entries.iter().any(has_int) => return Ok(d),
                None => {}
            },
            Err(e) => {
                if let (Some(w), ShapeError::NotLiteral { name, .. }) = (&want, &e) {
                    if name == &format!("parametrize({w})") {
                        return Err(e);
                    }
                }
                first_err.get_or_insert(e);
            }
        }
    }
    if want.is_none() {
        if let Some(e) = first_err {
            return Err(e);
        }
    }
    Err(ShapeError::NoParametrize(match want {
        Some(w) => format!(" with argument names \"{w}\""),
        None => " whose values hold integers".into(),
    }))
}

/// The parametrize decorators that declare the same shapes as `argnames`: those with these
/// argument names, or as many names starting with the same one (rocmbench's correctness and
/// performance tests: `SIZE, BLOCK_SIZE, dtype_str` and `SIZE, BLOCK_SIZE_ARG, dtype_str`).
/// Each declaration once (two decorators may name one list).
pub fn parametrize_group(src: &str, argnames: &str) -> Vec<ParametrizeDecl> {
    let want: Vec<&str> = argnames.split(", ").collect();
    let mut out: Vec<ParametrizeDecl> = Vec::new();
    for d in parametrize_decorators(src).into_iter().flatten() {
        let names: Vec<&str> = d.argnames.split(", ").collect();
        let same = names == want || (names.len() == want.len() && names[0] == want[0]);
        if same && !out.iter().any(|o| o.decl.span == d.decl.span) {
            out.push(d);
        }
    }
    out
}

/// The entries of every decorator of the group, each once, in order.
pub(crate) fn group_entries(src: &str, argnames: &str) -> Result<Vec<Value>, ShapeError> {
    let group = parametrize_group(src, argnames);
    if group.is_empty() {
        // Not found as a group: the error of the single decorator says why.
        return Ok(read_parametrize(src, Some(argnames))?.entries);
    }
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for e in group.into_iter().flat_map(|d| d.entries) {
        let key = e.to_python();
        if !seen.contains(&key) {
            seen.push(key);
            out.push(e);
        }
    }
    Ok(out)
}
