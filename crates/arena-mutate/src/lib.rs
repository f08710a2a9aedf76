//! Inputs for the property tests of arena's parsers of outside input (task configs, recipes,
//! lockfiles, hidden sets, agent files, results, tokens): a valid file, edited at random.
//!
//! Two kinds of edit, because a parser has two layers to get past:
//! - [`ByteEdit`]s break the syntax (a quote removed, a delimiter inserted, the file cut
//!   short): the parser's own error must name the file.
//! - [`DocEdit`]s keep the syntax and break the meaning: the document is read as a tree, a node
//!   is replaced (a number where a string was, a path with `..`, a 10 000-character string,
//!   nesting 64 deep), removed or repeated, and the tree is written back in its format. These
//!   reach arena's own checks, which must refuse with the file and the field, never panic.
//!
//! Every edit is a plain value that proptest shrinks, so a failure is reported as the smallest
//! edit list that still fails, and proptest keeps it in the crate's `proptest-regressions/`.

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Pieces of every format's syntax, and values parsers trip on: inserted more often than noise.
const TOKENS: &[&str] = &[
    "\n",
    "\"",
    "'",
    "[",
    "]",
    "{",
    "}",
    ":",
    "=",
    ",",
    "- ",
    "#",
    "\\",
    "\0",
    "..",
    "/",
    "-1",
    "1e999",
    "NaN",
    "\u{feff}",
    "&a ",
    "*a",
    "!!binary ",
    "~",
    "[[",
    "]]",
    "\t",
    "é",
    "0x",
];

/// One edit of a file's bytes; positions are taken modulo the length, so any edit applies to
/// any file.
#[derive(Debug, Clone)]
pub enum ByteEdit {
    Set { at: usize, byte: u8 },
    Delete { at: usize, len: usize },
    Insert { at: usize, text: Vec<u8> },
    Duplicate { at: usize, len: usize },
    Truncate { at: usize },
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    let text = prop_oneof![
        proptest::sample::select(TOKENS).prop_map(|t| t.as_bytes().to_vec()),
        proptest::collection::vec(any::<u8>(), 1..8),
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| ByteEdit::Set { at, byte }),
        (any::<usize>(), 1usize..16).prop_map(|(at, len)| ByteEdit::Delete { at, len }),
        (any::<usize>(), text).prop_map(|(at, text)| ByteEdit::Insert { at, text }),
        (any::<usize>(), 1usize..64).prop_map(|(at, len)| ByteEdit::Duplicate { at, len }),
        any::<usize>().prop_map(|at| ByteEdit::Truncate { at }),
    ]
}

/// One to five byte edits.
pub fn byte_edits() -> impl Strategy<Value = Vec<ByteEdit>> {
    proptest::collection::vec(byte_edit(), 1..6)
}

/// `bytes` with `edits` applied in order.
pub fn apply_bytes(bytes: &[u8], edits: &[ByteEdit]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for e in edits {
        let at = |i: usize| i % (b.len() + 1);
        match e {
            ByteEdit::Set { at: i, byte } if !b.is_empty() => {
                let i = i % b.len();
                b[i] = *byte;
            }
            ByteEdit::Set { .. } => {}
            ByteEdit::Delete { at: i, len } => {
                let i = at(*i);
                let end = (i + len).min(b.len());
                b.drain(i..end);
            }
            ByteEdit::Insert { at: i, text } => {
                let i = at(*i);
                b.splice(i..i, text.iter().copied());
            }
            ByteEdit::Duplicate { at: i, len } => {
                let i = at(*i);
                let end = (i + len).min(b.len());
                let piece = b[i..end].to_vec();
                b.splice(i..i, piece);
            }
            ByteEdit::Truncate { at: i } => {
                let i = at(*i);
                b.truncate(i);
            }
        }
    }
    b
}

/// What a node of a document is replaced with.
#[derive(Debug, Clone)]
pub enum Leaf {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    EmptyArray,
    EmptyObject,
    /// Arrays nested this deep around a 1.
    Deep(usize),
}

fn leaf() -> impl Strategy<Value = Leaf> {
    let strings = prop_oneof![
        proptest::sample::select(
            &[
                "",
                " ",
                "../../../etc/passwd",
                "/etc/passwd",
                "a/../../b",
                "sha256:",
                "sha256:zz",
                "-1",
                "NaN",
                "1e400",
                "\0",
                "x y",
                "*",
                "task",
                "none",
            ][..]
        )
        .prop_map(str::to_string),
        "[a-z0-9_./:-]{0,12}",
        (1usize..4).prop_map(|k| "x".repeat(10usize.pow(k as u32 + 1))),
    ];
    prop_oneof![
        Just(Leaf::Null),
        any::<bool>().prop_map(Leaf::Bool),
        prop_oneof![
            Just(i64::MIN),
            Just(-1i64),
            Just(0i64),
            Just(u32::MAX as i64 + 1),
            Just(i64::MAX),
            any::<i64>()
        ]
        .prop_map(Leaf::Int),
        prop_oneof![
            Just(-0.5f64),
            Just(1e300),
            Just(f64::MIN_POSITIVE),
            any::<f64>()
        ]
        .prop_map(Leaf::Float),
        strings.prop_map(Leaf::Str),
        Just(Leaf::EmptyArray),
        Just(Leaf::EmptyObject),
        (2usize..64).prop_map(Leaf::Deep),
    ]
}

impl Leaf {
    fn value(&self) -> Value {
        match self {
            Leaf::Null => Value::Null,
            Leaf::Bool(b) => Value::Bool(*b),
            Leaf::Int(i) => Value::from(*i),
            // A float JSON cannot hold (NaN, ∞) becomes null, as serde_json writes it.
            Leaf::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Leaf::Str(s) => Value::String(s.clone()),
            Leaf::EmptyArray => Value::Array(vec![]),
            Leaf::EmptyObject => Value::Object(Map::new()),
            Leaf::Deep(n) => (0..*n).fold(Value::from(1), |v, _| Value::Array(vec![v])),
        }
    }
}

/// Strings that name places, half of them outside wherever they are read from: a field that
/// holds a path is where a reader must refuse these.
const PATHS: &[&str] = &[
    "../../../etc/passwd",
    "/etc/passwd",
    "a/../../b",
    "./../x",
    "..",
    "/",
    "scripts/task_runner.py",
    "source/x.py",
];

/// One edit of a document's tree; `node` counts nodes in document order, modulo their number.
#[derive(Debug, Clone)]
pub enum DocEdit {
    Replace {
        node: usize,
        with: Leaf,
    },
    /// The `nth` string of the document (modulo their number) becomes `with`: a path, most
    /// often, since any string may be one.
    ReplaceString {
        nth: usize,
        with: String,
    },
    /// The node leaves its array or object (the root stays).
    Remove {
        node: usize,
    },
    /// An element of an array, or an array's last element, repeated.
    Repeat {
        node: usize,
        times: usize,
    },
}

fn doc_edit() -> impl Strategy<Value = DocEdit> {
    let strings = prop_oneof![
        3 => proptest::sample::select(PATHS).prop_map(str::to_string),
        1 => leaf().prop_map(|l| match l {
            Leaf::Str(s) => s,
            other => other.value().to_string(),
        }),
    ];
    prop_oneof![
        3 => (any::<usize>(), leaf()).prop_map(|(node, with)| DocEdit::Replace { node, with }),
        3 => (any::<usize>(), strings).prop_map(|(nth, with)| DocEdit::ReplaceString { nth, with }),
        2 => any::<usize>().prop_map(|node| DocEdit::Remove { node }),
        1 => (any::<usize>(), 2usize..200).prop_map(|(node, times)| DocEdit::Repeat { node, times }),
    ]
}

/// One to three document edits.
pub fn doc_edits() -> impl Strategy<Value = Vec<DocEdit>> {
    proptest::collection::vec(doc_edit(), 1..4)
}

fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(o) => o.values().map(count).sum(),
        _ => 0,
    }
}

fn children(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(o) => o.values().collect(),
        _ => vec![],
    }
}

/// The child indices from the root to node `n` (pre-order, the root being 0).
fn path_to(v: &Value, n: usize) -> Vec<usize> {
    let mut path = Vec::new();
    let (mut v, mut n) = (v, n);
    while n > 0 {
        n -= 1;
        for (i, c) in children(v).into_iter().enumerate() {
            let size = count(c);
            if n < size {
                path.push(i);
                v = c;
                break;
            }
            n -= size;
        }
    }
    path
}

fn child(v: &mut Value, i: usize) -> &mut Value {
    match v {
        Value::Array(a) => &mut a[i],
        Value::Object(o) => o.values_mut().nth(i).expect("in range"),
        _ => unreachable!("a path goes through containers only"),
    }
}

fn at<'a>(mut v: &'a mut Value, path: &[usize]) -> &'a mut Value {
    for &i in path {
        v = child(v, i);
    }
    v
}

/// The pre-order numbers of the document's strings.
fn strings(v: &Value, first: usize, out: &mut Vec<usize>) {
    if v.is_string() {
        out.push(first);
    }
    let mut n = first + 1;
    for c in children(v) {
        strings(c, n, out);
        n += count(c);
    }
}

/// `doc` with `edits` applied in order.
pub fn apply_doc(doc: &mut Value, edits: &[DocEdit]) {
    for e in edits {
        let node = match e {
            DocEdit::Replace { node, .. }
            | DocEdit::Remove { node }
            | DocEdit::Repeat { node, .. } => *node,
            DocEdit::ReplaceString { nth, with } => {
                let mut found = Vec::new();
                strings(doc, 0, &mut found);
                if !found.is_empty() {
                    let path = path_to(doc, found[nth % found.len()]);
                    *at(doc, &path) = Value::String(with.clone());
                }
                continue;
            }
        };
        let path = path_to(doc, node % count(doc));
        match e {
            DocEdit::Replace { with, .. } => *at(doc, &path) = with.value(),
            DocEdit::Remove { .. } => {
                if let Some((&i, up)) = path.split_last() {
                    match at(doc, up) {
                        Value::Array(a) => {
                            a.remove(i);
                        }
                        Value::Object(o) => {
                            let k = o.keys().nth(i).expect("in range").clone();
                            o.remove(&k);
                        }
                        _ => unreachable!("a path goes through containers only"),
                    }
                }
            }
            DocEdit::ReplaceString { .. } => unreachable!("applied above"),
            DocEdit::Repeat { times, .. } => {
                if let Value::Array(a) = at(doc, &path) {
                    if let Some(last) = a.last().cloned() {
                        a.extend(std::iter::repeat_n(last, *times));
                    }
                }
            }
        }
    }
}

/// A document format: read into a tree, written back.
#[derive(Debug, Clone, Copy)]
pub enum Format {
    Json,
    Toml,
    Yaml,
}

impl Format {
    pub fn read(self, text: &str) -> Option<Value> {
        match self {
            Format::Json => serde_json::from_str(text).ok(),
            Format::Toml => toml::from_str::<toml::Value>(text)
                .ok()
                .and_then(|v| serde_json::to_value(v).ok()),
            Format::Yaml => serde_norway::from_str(text).ok(),
        }
    }

    /// The tree in this format; None where the format cannot hold it (TOML has no null).
    pub fn write(self, v: &Value) -> Option<String> {
        match self {
            Format::Json => serde_json::to_string_pretty(v).ok(),
            Format::Toml => toml::to_string(v).ok(),
            Format::Yaml => serde_norway::to_string(v).ok(),
        }
    }
}

/// `text` (a valid file of format `format`) edited: as bytes, or as a document where it reads
/// as one. A document edit the format cannot write back gives the text unchanged.
pub fn mutated(text: &str, format: Format) -> BoxedStrategy<Vec<u8>> {
    let bytes = text.as_bytes().to_vec();
    let by_bytes = byte_edits().prop_map(move |e| apply_bytes(&bytes, &e));
    match format.read(text) {
        Some(doc) => {
            let original = text.as_bytes().to_vec();
            let by_doc = doc_edits().prop_map(move |e| {
                let mut d = doc.clone();
                apply_doc(&mut d, &e);
                format
                    .write(&d)
                    .map_or_else(|| original.clone(), String::into_bytes)
            });
            prop_oneof![by_bytes, by_doc].boxed()
        }
        None => by_bytes.boxed(),
    }
}

/// One of `texts` (valid files of `format`, read once by the caller) edited as [`mutated`]
/// edits it: which one, and its bytes.
pub fn one_edited(texts: Vec<String>, format: Format) -> BoxedStrategy<(usize, Vec<u8>)> {
    (0..texts.len())
        .prop_flat_map(move |i| mutated(&texts[i], format).prop_map(move |b| (i, b)))
        .boxed()
}

/// Text of no format at all: any characters, or a run of syntax pieces.
pub fn noise() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        proptest::collection::vec(proptest::sample::select(TOKENS), 0..40).prop_map(|t| t.concat()),
    ]
}

#[cfg(test)]
mod tests;
