//! A fourth form (gpumode activation tasks): `get_inputs()` walks a literal list of shapes it
//! holds in a local name —
//!
//! ```python
//! def get_inputs():
//!     configs = [
//!         ([1024],),
//!         ([64, 128],),
//!     ]
//!     for shape in configs:
//!         ...
//! ```
//!
//! or walks directly (`for b, d in [(512, 16384), (1024, 16384)]:`, KernelBench-style). Like a
//! module-level `TEST_SHAPES`, the list holds every configuration, so one rewritten file holds
//! the whole unseen set.

use super::has_int;
use crate::shapes::{Parser, ShapeDecl, ShapeError, Value};

fn identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The name a `for … in [...]:` list is recorded under (`get_inputs().for`): a keyword, so no
/// local name can be mistaken for it.
pub const FOR_LOOP: &str = "for";

/// The first `NAME = [...]` (or `for … in [...]:`) in the body of `def get_inputs()` whose
/// literal holds integers.
pub fn read_local_list(src: &str) -> Result<ShapeDecl, ShapeError> {
    let mut offset = 0;
    let mut def_line = None;
    for (i, line) in src.split_inclusive('\n').enumerate() {
        let line_no = i + 1;
        let indented = line.starts_with([' ', '\t']);
        if def_line.is_none() {
            if line.starts_with("def get_inputs(") {
                def_line = Some(line_no);
            }
            offset += line.len();
            continue;
        }
        if !indented && !line.trim().is_empty() {
            break; // the body ended
        }
        let trimmed = line.trim_start();
        // `for b, d in [(512, 16384), …]:` walks a literal list too (KernelBench-style).
        if let Some(rest) = trimmed.strip_prefix("for ") {
            if let Some(at) = rest.find(" in [") {
                let mut p = Parser::at(
                    src,
                    offset + (line.len() - rest.len()) + at + 4,
                    "get_inputs",
                );
                let start = p.pos;
                if let Ok(Value::List(entries)) = p.value() {
                    let end = p.pos;
                    let tail: String = src[end..].chars().take_while(|c| *c != '\n').collect();
                    if tail.trim_start().starts_with(':')
                        && !entries.is_empty()
                        && entries.iter().all(has_int)
                    {
                        return Ok(ShapeDecl {
                            name: FOR_LOOP.to_string(),
                            entries,
                            span: (start, end),
                            line: line_no,
                        });
                    }
                }
            }
        }
        if let Some((lhs, rhs)) = trimmed.split_once('=') {
            let lhs = lhs.split(':').next().unwrap_or("").trim();
            if identifier(lhs) && !rhs.starts_with('=') && rhs.trim_start().starts_with('[') {
                let mut p = Parser::at(src, offset + line.len() - rhs.len(), "get_inputs");
                p.skip();
                let start = p.pos;
                if let Ok(Value::List(entries)) = p.value() {
                    let end = p.pos;
                    let tail: String = src[end..].chars().take_while(|c| *c != '\n').collect();
                    let tail = tail.trim();
                    if (tail.is_empty() || tail.starts_with('#'))
                        && !entries.is_empty()
                        && entries.iter().all(has_int)
                    {
                        return Ok(ShapeDecl {
                            name: lhs.to_string(),
                            entries,
                            span: (start, end),
                            line: line_no,
                        });
                    }
                }
            }
        }
        offset += line.len();
    }
    let line = def_line.ok_or(ShapeError::NoGetInputs)?;
    Err(ShapeError::GetInputs {
        line,
        message: "holds no literal list of shapes in a local name".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapes::rewrite_source;

    const SRC: &str = "import torch\n\ndef get_inputs():\n    \"\"\"Doc.\"\"\"\n    configs = [\n        # 1D\n        ([1024],),\n        ([64, 128],),  # 2D\n    ]\n    for shape in configs:\n        yield [torch.randn(shape[0])]\n\n\ndef get_init_inputs():\n    return []\n";

    #[test]
    fn reads_the_local_list_and_rewrites_it_in_place() {
        let d = read_local_list(SRC).unwrap();
        assert_eq!(d.name, "configs");
        assert_eq!(d.line, 5);
        let shown: Vec<String> = d.entries.iter().map(Value::to_python).collect();
        assert_eq!(shown, ["([1024],)", "([64, 128],)"]);
        let out = rewrite_source(SRC, &d, &["([7],)".to_string(), "([3, 5],)".to_string()]);
        let again = read_local_list(&out).unwrap();
        let shown: Vec<String> = again.entries.iter().map(Value::to_python).collect();
        assert_eq!(shown, ["([7],)", "([3, 5],)"]);
        assert!(out.ends_with("    for shape in configs:\n        yield [torch.randn(shape[0])]\n\n\ndef get_init_inputs():\n    return []\n"));
    }

    #[test]
    fn a_for_loop_over_a_literal_list_is_read_and_rewritten() {
        let src = "import torch\n\ndef get_inputs():\n    # escalate sizes\n    for b, d in [(512, 16384), (1024, 32768)]:\n        yield [torch.rand(b, d)]\n";
        let d = read_local_list(src).unwrap();
        assert_eq!((d.name.as_str(), d.line), (FOR_LOOP, 5));
        assert_eq!(d.entries.len(), 2);
        let out = rewrite_source(src, &d, &["(3, 5)".to_string()]);
        assert!(
            out.contains("    for b, d in [\n    (3, 5),\n]:\n        yield"),
            "{out}"
        );
        assert_eq!(read_local_list(&out).unwrap().entries.len(), 1);
    }

    #[test]
    fn lists_outside_get_inputs_or_without_integers_are_not_shapes() {
        let other = "configs = [(1, 2)]\n\ndef get_inputs():\n    names = ['a', 'b']\n    return [torch.randn(4)]\n";
        assert!(matches!(
            read_local_list(other),
            Err(ShapeError::GetInputs { line: 3, .. })
        ));
        assert_eq!(read_local_list("x = 1\n"), Err(ShapeError::NoGetInputs));
        let computed = "def get_inputs():\n    configs = [(1, 2)] + MORE\n";
        assert!(read_local_list(computed).is_err());
    }
}
