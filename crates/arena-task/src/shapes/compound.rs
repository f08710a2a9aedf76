//! The compound literals of shape lists beyond lists and tuples: dicts (`{"M": 1}`,
//! `dict(M=1)`, the form of flydsl and sglang harnesses) and one-level comprehensions over a
//! literal list (`[(98432, 1024, d) for d in ["float16", "float32"]]`, rocmbench parametrize
//! lists), which are read as the list they build.

use super::{Parser, ShapeError, Value};

impl Parser<'_> {
    fn unclosed(&self, what: char) -> ShapeError {
        ShapeError::Syntax {
            line: self.line(),
            message: format!("unclosed `{what}`"),
        }
    }

    fn identifier(&self) -> &str {
        let rest = &self.src[self.pos..];
        let end = rest
            .char_indices()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
            .map_or(rest.len(), |(i, _)| i);
        &rest[..end]
    }

    /// `{"key": value, ...}` with string keys.
    pub(super) fn dict_literal(&mut self) -> Result<Value, ShapeError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip();
            match self.peek() {
                Some('}') => {
                    self.pos += 1;
                    return Ok(Value::Dict(items));
                }
                None => return Err(self.unclosed('{')),
                _ => {}
            }
            let Value::Str(key) = self.value()? else {
                return Err(self.not_literal("a dict key that is not a string"));
            };
            self.skip();
            if self.peek() != Some(':') {
                return Err(self.not_literal("a dict entry without `:`"));
            }
            self.pos += 1;
            items.push((key, self.value()?));
            self.skip();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some('}') => {}
                Some(other) => return Err(self.not_literal(format!("`{other}` in a dict"))),
                None => return Err(self.unclosed('{')),
            }
        }
    }

    /// `dict(key=value, ...)`: keyword arguments only.
    pub(super) fn dict_call(&mut self) -> Result<Value, ShapeError> {
        self.pos += "dict(".len();
        let mut items = Vec::new();
        loop {
            self.skip();
            match self.peek() {
                Some(')') => {
                    self.pos += 1;
                    return Ok(Value::Dict(items));
                }
                None => return Err(self.unclosed('(')),
                _ => {}
            }
            let key = self.identifier().to_string();
            if key.is_empty() {
                return Err(self.not_literal("dict() with a positional argument"));
            }
            self.pos += key.len();
            self.skip();
            if self.peek() != Some('=') {
                return Err(self.not_literal(format!("dict() argument `{key}` without `=`")));
            }
            self.pos += 1;
            items.push((key, self.value()?));
            self.skip();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(')') => {}
                Some(other) => return Err(self.not_literal(format!("`{other}` in dict()"))),
                None => return Err(self.unclosed('(')),
            }
        }
    }

    /// Where the ` for ` of a comprehension starting at `self.pos` (`[`) is, if it is one:
    /// the keyword at bracket depth one, outside strings.
    fn comprehension_for(&self) -> Option<usize> {
        let bytes = self.src.as_bytes();
        let mut depth = 0usize;
        let mut quote: Option<u8> = None;
        let mut i = self.pos;
        while i < bytes.len() {
            let b = bytes[i];
            if let Some(q) = quote {
                if b == b'\\' {
                    i += 1;
                } else if b == q {
                    quote = None;
                }
            } else {
                match b {
                    b'"' | b'\'' => quote = Some(b),
                    b'#' => {
                        while i < bytes.len() && bytes[i] != b'\n' {
                            i += 1;
                        }
                        continue;
                    }
                    b'[' | b'(' | b'{' => depth += 1,
                    b']' | b')' | b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return None;
                        }
                    }
                    b'f' if depth == 1
                        && self.src[i..].starts_with("for")
                        && bytes.get(i + 3).is_some_and(u8::is_ascii_whitespace)
                        && i > 0
                        && !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') =>
                    {
                        return Some(i);
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        None
    }

    pub(super) fn comprehension_ahead(&self) -> bool {
        self.comprehension_for().is_some()
    }

    /// `[ELEMENT for NAME in [ITEMS]]`, read as the list of ELEMENT with NAME bound to each
    /// item. A condition, a second `for` or an iterable that is not a literal is refused.
    pub(super) fn comprehension(&mut self) -> Result<Value, ShapeError> {
        let for_at = self
            .comprehension_for()
            .expect("checked by comprehension_ahead");
        let element = self.pos + 1;
        self.pos = for_at + 3;
        self.skip();
        let name = self.identifier().to_string();
        if name.is_empty() {
            return Err(self.not_literal("a comprehension over a pattern, not one name"));
        }
        self.pos += name.len();
        self.skip();
        if !self.src[self.pos..].starts_with("in") {
            return Err(self.not_literal("a comprehension without `in`"));
        }
        self.pos += 2;
        let items = match self.value()? {
            Value::List(xs) | Value::Tuple(xs) => xs,
            _ => return Err(self.not_literal("a comprehension over something not a list")),
        };
        self.skip();
        if self.peek() != Some(']') {
            return Err(self.not_literal("a comprehension with a condition or a second `for`"));
        }
        let end = self.pos + 1;
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let mut p = Parser {
                src: self.src,
                pos: element,
                name: self.name,
                bound: Some((name.clone(), item)),
            };
            out.push(p.value()?);
            p.skip();
            if p.pos != for_at {
                return Err(p.not_literal("a comprehension element that is not one literal"));
            }
        }
        self.pos = end;
        Ok(Value::List(out))
    }
}
