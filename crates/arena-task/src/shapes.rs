//! The visible shape declaration of a task runner: the module-level `TEST_SHAPES = [...]`
//! literal (AgentKernelArena's vllm convention). Read without running Python, and rewritten
//! in place (the evaluator's private harness copy gets the hidden unseen shapes this way).
//! Anything that is not a literal — a comprehension, a name, arithmetic — is refused: such
//! shapes cannot be read or replaced safely.

use std::fmt::Write;

/// A Python literal value as it appears in a shape list.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    None,
    Tuple(Vec<Value>),
    List(Vec<Value>),
    /// `{"M": 1, "N": 4}` or `dict(M=1, N=4)`: string keys, in source order.
    Dict(Vec<(String, Value)>),
}

impl Value {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// Renders as Python source (a 1-tuple keeps its comma).
    pub fn to_python(&self) -> String {
        let mut s = String::new();
        self.write_python(&mut s);
        s
    }

    fn write_python(&self, out: &mut String) {
        let seq = |out: &mut String, items: &[Value], open: char, close: char, tuple: bool| {
            out.push(open);
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                v.write_python(out);
            }
            if tuple && items.len() == 1 {
                out.push(',');
            }
            out.push(close);
        };
        match self {
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Float(f) => {
                let _ = write!(out, "{f:?}");
            }
            Value::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            Value::None => out.push_str("None"),
            Value::Tuple(items) => seq(out, items, '(', ')', true),
            Value::List(items) => seq(out, items, '[', ']', false),
            Value::Dict(items) => {
                out.push('{');
                for (i, (k, v)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    Value::Str(k.clone()).write_python(out);
                    out.push_str(": ");
                    v.write_python(out);
                }
                out.push('}');
            }
        }
    }
}

/// The declaration found in a file: its entries and the byte range of the literal.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeDecl {
    pub name: String,
    pub entries: Vec<Value>,
    /// Byte range of the `[...]` literal in the source.
    pub span: (usize, usize),
    /// 1-based line of the assignment.
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("no module-level `{0} = [...]` assignment")]
    NotFound(String),
    #[error("line {line}: {name} is not a literal list ({what}); computed shapes cannot be read or replaced")]
    NotLiteral {
        name: String,
        line: usize,
        what: String,
    },
    #[error("line {line}: {message}")]
    Syntax { line: usize, message: String },
    #[error("no `@pytest.mark.parametrize` decorator{0}")]
    NoParametrize(String),
    #[error("no module-level `def get_inputs():`")]
    NoGetInputs,
    #[error("line {line}: get_inputs() {message}")]
    GetInputs { line: usize, message: String },
}

pub(crate) struct Parser<'a> {
    pub(crate) src: &'a str,
    pub(crate) pos: usize,
    pub(crate) name: &'a str,
    /// A name bound to a value while the element of a comprehension is read
    /// (`[(98432, 1024, d) for d in ["float16", "float32"]]`).
    bound: Option<(String, Value)>,
}

impl<'a> Parser<'a> {
    pub(crate) fn at(src: &'a str, pos: usize, name: &'a str) -> Parser<'a> {
        Parser {
            src,
            pos,
            name,
            bound: None,
        }
    }

    pub(crate) fn line(&self) -> usize {
        self.src[..self.pos].matches('\n').count() + 1
    }

    pub(crate) fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    /// Skips whitespace, newlines, line continuations and comments.
    pub(crate) fn skip(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() || c == '\\' {
                self.pos += c.len_utf8();
            } else if c == '#' {
                while let Some(c) = self.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.pos += c.len_utf8();
                }
            } else {
                break;
            }
        }
    }

    pub(crate) fn not_literal(&self, what: impl Into<String>) -> ShapeError {
        ShapeError::NotLiteral {
            name: self.name.to_string(),
            line: self.line(),
            what: what.into(),
        }
    }

    pub(crate) fn value(&mut self) -> Result<Value, ShapeError> {
        self.skip();
        let c = self.peek().ok_or(ShapeError::Syntax {
            line: self.line(),
            message: "unexpected end of file".into(),
        })?;
        match c {
            '{' => self.dict_literal(),
            '[' if self.comprehension_ahead() => self.comprehension(),
            '[' | '(' => {
                let close = if c == '[' { ']' } else { ')' };
                self.pos += 1;
                let mut items = Vec::new();
                let mut had_comma = false;
                loop {
                    self.skip();
                    match self.peek() {
                        Some(x) if x == close => {
                            self.pos += 1;
                            break;
                        }
                        None => {
                            return Err(ShapeError::Syntax {
                                line: self.line(),
                                message: format!("unclosed `{c}`"),
                            })
                        }
                        _ => {}
                    }
                    items.push(self.value()?);
                    self.skip();
                    match self.peek() {
                        Some(',') => {
                            self.pos += 1;
                            had_comma = true;
                        }
                        Some(x) if x == close => {}
                        Some(other) => {
                            return Err(self.not_literal(format!("`{other}` after an entry")))
                        }
                        None => {
                            return Err(ShapeError::Syntax {
                                line: self.line(),
                                message: format!("unclosed `{c}`"),
                            })
                        }
                    }
                }
                Ok(if c == '[' {
                    Value::List(items)
                } else if items.len() == 1 && !had_comma {
                    // `(x)` is x in parentheses, not a tuple.
                    items.pop().expect("one item")
                } else {
                    Value::Tuple(items)
                })
            }
            '"' | '\'' => self.string(c),
            '-' | '+' | '0'..='9' | '.' => self.number(),
            _ => {
                let word: String = self.src[self.pos..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
                    .collect();
                match word.as_str() {
                    "True" | "False" | "None" => {
                        self.pos += word.len();
                        Ok(match word.as_str() {
                            "True" => Value::Bool(true),
                            "False" => Value::Bool(false),
                            _ => Value::None,
                        })
                    }
                    "dict" if self.src[self.pos + 4..].starts_with('(') => self.dict_call(),
                    "" => Err(self.not_literal(format!("`{c}`"))),
                    w => match &self.bound {
                        Some((n, v)) if n == w => {
                            let v = v.clone();
                            self.pos += w.len();
                            Ok(v)
                        }
                        _ => Err(self.not_literal(format!("the name `{w}`"))),
                    },
                }
            }
        }
    }

    fn string(&mut self, quote: char) -> Result<Value, ShapeError> {
        self.pos += 1;
        let mut s = String::new();
        while let Some(c) = self.peek() {
            self.pos += c.len_utf8();
            match c {
                '\\' => {
                    if let Some(n) = self.peek() {
                        self.pos += n.len_utf8();
                        s.push(match n {
                            'n' => '\n',
                            't' => '\t',
                            other => other,
                        });
                    }
                }
                c if c == quote => return Ok(Value::Str(s)),
                '\n' => break,
                c => s.push(c),
            }
        }
        Err(ShapeError::Syntax {
            line: self.line(),
            message: "unterminated string".into(),
        })
    }

    fn number(&mut self) -> Result<Value, ShapeError> {
        let start = self.pos;
        let text: String = self.src[self.pos..]
            .chars()
            .enumerate()
            .take_while(|(i, c)| {
                c.is_ascii_alphanumeric()
                    || *c == '.'
                    || *c == '_'
                    || ((*c == '-' || *c == '+') && *i == 0)
            })
            .map(|(_, c)| c)
            .collect();
        self.pos += text.len();
        let clean = text.replace('_', "");
        // Arithmetic right after a number (`2 * 1024`) is a computed shape. The number ends
        // where its text does (not after the whitespace or comment that follows it).
        let end = self.pos;
        self.skip();
        if let Some(op @ ('*' | '+' | '-' | '/' | '%' | '<' | '>')) = self.peek() {
            self.pos = start;
            return Err(self.not_literal(format!("arithmetic `{text} {op} …`")));
        }
        self.pos = end;
        if let Ok(i) = clean.parse::<i64>() {
            return Ok(Value::Int(i));
        }
        if let Ok(f) = clean.parse::<f64>() {
            return Ok(Value::Float(f));
        }
        self.pos = start;
        Err(self.not_literal(format!("`{text}`")))
    }
}

/// Finds `name = [...]` at the start of a line (module level) and reads its literal.
pub fn read_decl(src: &str, name: &str) -> Result<ShapeDecl, ShapeError> {
    let mut offset = 0;
    for line in src.split_inclusive('\n') {
        let rest = line.strip_prefix(name);
        let assign = rest.map(|r| r.trim_start()).and_then(|r| {
            // `TEST_SHAPES = …` or `TEST_SHAPES: list[...] = …`, not `==` or a longer name.
            let r = if let Some(annot) = r.strip_prefix(':') {
                annot.split_once('=').map(|(_, v)| v)?
            } else {
                r.strip_prefix('=').filter(|v| !v.starts_with('='))?
            };
            Some(r)
        });
        if let Some(value) = assign {
            let value_start = offset + line.len() - value.len();
            let mut p = Parser::at(src, value_start, name);
            p.skip();
            let start = p.pos;
            let line_no = src[..offset].matches('\n').count() + 1;
            if p.peek() != Some('[') {
                let what: String = src[start..]
                    .chars()
                    .take_while(|c| *c != '\n')
                    .take(40)
                    .collect();
                return Err(ShapeError::NotLiteral {
                    name: name.into(),
                    line: line_no,
                    what: format!("`{}`", what.trim()),
                });
            }
            let v = p.value()?;
            let end = p.pos;
            // Anything but a comment after the literal (`+ MORE`, `* 2`) makes it computed.
            let tail: String = src[end..].chars().take_while(|c| *c != '\n').collect();
            let tail = tail.trim();
            if !tail.is_empty() && !tail.starts_with('#') {
                return Err(ShapeError::NotLiteral {
                    name: name.into(),
                    line: line_no,
                    what: format!("`{tail}` after the list"),
                });
            }
            let Value::List(entries) = v else {
                unreachable!("starts with [")
            };
            return Ok(ShapeDecl {
                name: name.into(),
                entries,
                span: (start, end),
                line: line_no,
            });
        }
        offset += line.len();
    }
    Err(ShapeError::NotFound(name.into()))
}

/// Every module-level `NAME = [...]` whose value is a literal list, in source order (the
/// candidates for a shape declaration under another name than `TEST_SHAPES`).
pub fn module_lists(src: &str) -> Vec<(String, Vec<Value>)> {
    let mut out: Vec<(String, Vec<Value>)> = Vec::new();
    for line in src.lines() {
        let name: String = line
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let rest = line[name.len()..].trim_start();
        let value = rest.strip_prefix('=').filter(|v| !v.starts_with('='));
        if value.is_some_and(|v| v.trim_start().starts_with('[')) {
            if let Ok(d) = read_decl(src, &name) {
                out.retain(|(n, _)| n != &name);
                out.push((name, d.entries));
            }
        }
    }
    out
}

/// The source with the declaration's literal replaced by `entries` (one per line).
pub fn rewrite(src: &str, decl: &ShapeDecl, entries: &[Value]) -> String {
    let mut lit = String::from("[\n");
    for e in entries {
        let _ = writeln!(lit, "    {},", e.to_python());
    }
    lit.push(']');
    format!("{}{}{}", &src[..decl.span.0], lit, &src[decl.span.1..])
}

/// The source with the declaration's literal replaced by entries given as Python source (the
/// `entry` strings of a sealed unseen set).
pub fn rewrite_source(src: &str, decl: &ShapeDecl, entries: &[String]) -> String {
    let mut lit = String::from("[\n");
    for e in entries {
        let _ = writeln!(lit, "    {e},");
    }
    lit.push(']');
    format!("{}{}{}", &src[..decl.span.0], lit, &src[decl.span.1..])
}

mod compound;
#[cfg(test)]
mod tests;
