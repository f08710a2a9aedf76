//! A fifth form (vLLM's fla tasks): the function that makes a case's inputs sets its sizes
//! from integer literals at the top level of its body —
//!
//! ```python
//! def gen_inputs(seed, device):
//!     torch.manual_seed(seed)
//!     T, D = 512, 128
//!     x = torch.randn(T, D, device=device)
//! ```
//!
//! Like `get_inputs()`'s module constants, this describes one configuration: each unseen
//! configuration is a rewritten file of its own (declaration `gen_inputs():locals`).

use super::{GetInputsDecl, InputConstant};
use crate::shapes::ShapeError;

/// The functions that make a case's inputs, in the order they are looked for.
pub const INPUT_FUNCTIONS: &[&str] = &["gen_inputs", "make_inputs", "create_inputs", "get_inputs"];

/// The suffix of the declaration's name (`gen_inputs():locals`).
pub const SUFFIX: &str = "():locals";

fn identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// A plain decimal integer literal (`512`), with its byte range inside `piece` at `at`.
fn int_literal(piece: &str, at: usize) -> Option<(i64, (usize, usize))> {
    let lead = piece.len() - piece.trim_start().len();
    let t = piece.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((t.parse().ok()?, (at + lead, at + lead + t.len())))
}

/// `NAME = <int>` or `A, B = <int>, <int>` (parentheses allowed on either side): the names
/// with their values and spans, or None for any other statement.
fn int_assignment(line: &str, offset: usize, line_no: usize) -> Option<Vec<InputConstant>> {
    let code = line.split('#').next().unwrap_or("");
    let (lhs, rhs) = code.split_once('=')?;
    if rhs.starts_with('=') || lhs.ends_with(['=', '!', '<', '>', '+', '-', '*', '/']) {
        return None;
    }
    let names: Vec<&str> = lhs
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .collect();
    if !names.iter().all(|n| identifier(n)) {
        return None;
    }
    let rhs_at = offset + lhs.len() + 1;
    let inner = rhs.trim_end();
    let (open, inner) = match inner.trim_start().strip_prefix('(') {
        Some(rest) => (
            inner.len() - inner.trim_start().len() + 1,
            rest.strip_suffix(')')?,
        ),
        None => (0, inner),
    };
    let mut out = Vec::new();
    let mut at = rhs_at + open;
    for piece in inner.split(',') {
        let (value, span) = int_literal(piece, at)?;
        out.push((value, span));
        at += piece.len() + 1;
    }
    if out.len() != names.len() {
        return None;
    }
    Some(
        names
            .iter()
            .zip(out)
            .map(|(n, (value, span))| InputConstant {
                name: n.to_string(),
                value,
                span,
                line: line_no,
            })
            .collect(),
    )
}

/// The integer locals that the top level of `func`'s body assigns before anything uses
/// them, in order (a name assigned twice keeps its last literal).
pub fn read_fn_locals(src: &str, func: &str) -> Result<GetInputsDecl, ShapeError> {
    let head = format!("def {func}(");
    let mut offset = 0;
    let mut def_line = None;
    let mut indent: Option<usize> = None;
    let mut constants: Vec<InputConstant> = Vec::new();
    for (i, line) in src.split_inclusive('\n').enumerate() {
        let here = offset;
        offset += line.len();
        if def_line.is_none() {
            if line.starts_with(&head) {
                def_line = Some(i + 1);
            }
            continue;
        }
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let depth = line.len() - line.trim_start().len();
        if depth == 0 {
            break; // the body ended
        }
        let level = *indent.get_or_insert(depth);
        if depth != level {
            continue; // inside a block of the body: not a top-level size
        }
        if let Some(found) = int_assignment(line, here, i + 1) {
            for c in found {
                constants.retain(|x| x.name != c.name);
                constants.push(c);
            }
        }
    }
    let line = def_line.ok_or(ShapeError::NoGetInputs)?;
    if constants.is_empty() {
        return Err(ShapeError::GetInputs {
            line,
            message: format!("`{func}()` assigns no integer literal at the top of its body"),
        });
    }
    Ok(GetInputsDecl { constants, line })
}

/// The first input function of `src` whose body assigns integer sizes, with them.
pub fn find_fn_locals(src: &str) -> Option<(String, GetInputsDecl)> {
    INPUT_FUNCTIONS
        .iter()
        .find_map(|f| read_fn_locals(src, f).ok().map(|d| (f.to_string(), d)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declarations::rewrite_get_inputs;

    const SRC: &str = "import torch\n\n\ndef gen_inputs(seed, device):\n    import torch\n    torch.manual_seed(seed)\n    T, D = 512, 128  # tokens, width\n    eps = 1e-6\n    if device == 'cpu':\n        T = 8\n    x = torch.randn(T, D, device=device)\n    return (x,), {}\n\n\ndef run():\n    n = 4\n";

    #[test]
    fn reads_the_top_level_integer_sizes_and_rewrites_them() {
        let d = read_fn_locals(SRC, "gen_inputs").unwrap();
        let got: Vec<(&str, i64)> = d
            .constants
            .iter()
            .map(|c| (c.name.as_str(), c.value))
            .collect();
        // `eps` is no integer, `T = 8` lies inside a block, `n` in another function.
        assert_eq!(got, [("T", 512), ("D", 128)]);
        assert_eq!(d.line, 4);
        let out = rewrite_get_inputs(SRC, &d, "(1031, 64)").unwrap();
        assert!(
            out.contains("    T, D = 1031, 64  # tokens, width\n"),
            "{out}"
        );
        assert_eq!(out.len(), SRC.len());
        assert_eq!(find_fn_locals(SRC).unwrap().0, "gen_inputs");
    }

    #[test]
    fn parenthesized_and_single_assignments_and_refusals() {
        let src = "def make_inputs():\n    (M, N) = (64, 4096)\n    K = 32\n    return M, N, K\n";
        let d = read_fn_locals(src, "make_inputs").unwrap();
        let got: Vec<i64> = d.constants.iter().map(|c| c.value).collect();
        assert_eq!(got, [64, 4096, 32]);
        let out = rewrite_get_inputs(src, &d, "(1, 2, 3)").unwrap();
        assert_eq!(
            out,
            "def make_inputs():\n    (M, N) = (1, 2)\n    K = 3\n    return M, N, K\n"
        );
        for computed in [
            "def gen_inputs():\n    T = 2 * 256\n",
            "def gen_inputs():\n    T, D = SIZES[0]\n",
            "def gen_inputs():\n    T = 0x200\n",
            "def gen_inputs():\n    T, D = 512\n",
        ] {
            assert!(
                read_fn_locals(computed, "gen_inputs").is_err(),
                "{computed}"
            );
        }
        assert_eq!(
            read_fn_locals("x = 1\n", "gen_inputs"),
            Err(ShapeError::NoGetInputs)
        );
    }
}
