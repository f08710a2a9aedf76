//! Reading one KernelBench problem file: is it a problem, and which of its module constants
//! size the inputs.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use regex::Regex;

/// A problem file arena can turn into a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file's path below the imported directory (`level1/23_Softmax.py`).
    pub rel: String,
    /// The task id (`level1/23_Softmax`).
    pub id: String,
    pub source: String,
    /// Integer module constants that size `get_inputs()`'s tensors, in file order: the visible
    /// configuration, and what an unseen set varies.
    pub shape_constants: Vec<(String, i64)>,
}

/// A file that is not a problem arena can import, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    pub file: String,
    pub reason: String,
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("a valid pattern"))
}

/// A top-level assignment: its targets (`height = width`, chained) and its value.
fn assign_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(
        &R,
        r"(?m)^([A-Za-z_][A-Za-z0-9_]*(?:[ \t]*=[ \t]*[A-Za-z_][A-Za-z0-9_]*)*)[ \t]*=([^=].*)$",
    )
}

/// An integer the way KernelBench writes its sizes: `4096`, `2048 * 2`; a comment after it.
fn integer_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(
        &R,
        r"^[ \t]*(-?[0-9]+(?:[ \t]*\*[ \t]*[0-9]+)*)[ \t]*(?:#.*)?$",
    )
}

/// The value of an integer expression `integer_re` matched (None on overflow).
fn integer_value(expr: &str) -> Option<i64> {
    expr.split('*')
        .map(|f| f.trim().parse::<i64>().ok())
        .try_fold(1i64, |acc, f| acc.checked_mul(f?))
}

/// Every top-level assignment as (target names, value text), in file order.
fn assignments(src: &str) -> Vec<(Vec<String>, String)> {
    assign_re()
        .captures_iter(src)
        .map(|c| {
            let targets = c[1].split('=').map(|t| t.trim().to_string()).collect();
            (targets, c[2].to_string())
        })
        .collect()
}

fn word_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, r"[A-Za-z_][A-Za-z0-9_]*")
}

/// The body of the top-level function `name`: its indented lines (blank lines included).
fn function_body<'a>(src: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let head = format!("def {name}(");
    let mut lines = src.lines().skip_while(|l| !l.starts_with(&head));
    lines.next()?;
    Some(
        lines
            .take_while(|l| l.trim().is_empty() || l.starts_with([' ', '\t']))
            .collect(),
    )
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    word_re().find_iter(text).map(|m| m.as_str())
}

impl Problem {
    /// Reads `source` (the file `rel` below the imported directory).
    pub fn read(rel: &str, id: String, source: String) -> Result<Problem, Skipped> {
        let skip = |reason: &str| Skipped {
            file: rel.to_string(),
            reason: reason.to_string(),
        };
        let has_class = source
            .lines()
            .any(|l| l.starts_with("class Model(") || l.starts_with("class Model:"));
        if !has_class {
            return Err(skip("defines no top-level `class Model`"));
        }
        let Some(inputs_body) = function_body(&source, "get_inputs") else {
            return Err(skip("defines no top-level `get_inputs()`"));
        };
        if function_body(&source, "get_init_inputs").is_none() {
            return Err(skip("defines no top-level `get_init_inputs()`"));
        }
        // The names get_inputs() reads, and those read by top-level values it reads
        // (`shape = (batch_size, dim)`), to any depth.
        let assigned = assignments(&source);
        let mut used: BTreeSet<String> = words(&inputs_body.join("\n")).map(String::from).collect();
        loop {
            let before = used.len();
            for (targets, value) in &assigned {
                if targets.iter().any(|t| used.contains(t)) {
                    let read: Vec<String> = words(value).map(String::from).collect();
                    used.extend(read);
                }
            }
            if used.len() == before {
                break;
            }
        }
        let times = |name: &str| {
            assigned
                .iter()
                .filter(|(t, _)| t.iter().any(|t| t == name))
                .count()
        };
        // A size assigned twice is left alone: which value is the visible one is not plain.
        let mut shape_constants = Vec::new();
        for (targets, value) in &assigned {
            let Some(expr) = integer_re().captures(value) else {
                continue;
            };
            let Some(v) = integer_value(&expr[1]) else {
                continue;
            };
            for t in targets {
                if used.contains(t) && times(t) == 1 {
                    shape_constants.push((t.clone(), v));
                }
            }
        }
        Ok(Problem {
            rel: rel.to_string(),
            id,
            source,
            shape_constants,
        })
    }

    /// The agent's starting point: the problem with `Model` named `ModelNew` (the class and
    /// the `super(Model, self)` calls), so that the baseline is PyTorch eager.
    pub fn model_new(&self) -> String {
        static CLASS: OnceLock<Regex> = OnceLock::new();
        static SUPER: OnceLock<Regex> = OnceLock::new();
        let renamed = re(&CLASS, r"(?m)^class Model\b").replace_all(&self.source, "class ModelNew");
        re(&SUPER, r"\bsuper\(\s*Model\s*,")
            .replace_all(&renamed, "super(ModelNew,")
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOFTMAX: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n        super(Model, self).__init__()\n\n    def forward(self, x):\n        return torch.softmax(x, dim=1)\n\nbatch_size = 4096\ndim = 393216  # wide\nunused = 7\n\ndef get_inputs():\n    x = torch.rand(batch_size, dim)\n    return [x]\n\ndef get_init_inputs():\n    return []\n";

    fn read(src: &str) -> Result<Problem, Skipped> {
        Problem::read("level1/x.py", "level1/x".into(), src.to_string())
    }

    #[test]
    fn the_constants_get_inputs_reads_are_the_configuration() {
        let p = read(SOFTMAX).unwrap();
        assert_eq!(
            p.shape_constants,
            vec![("batch_size".into(), 4096), ("dim".into(), 393216)]
        );
    }

    #[test]
    fn constants_read_through_a_top_level_value_count_and_reassigned_ones_do_not() {
        let src = SOFTMAX
            .replace("x = torch.rand(batch_size, dim)", "x = torch.rand(*shape)")
            .replace(
                "unused = 7\n",
                "shape = (batch_size, dim)\nbatch_size = 8\n",
            );
        let p = read(&src).unwrap();
        // batch_size is assigned twice: rewriting the first would not change what runs.
        assert_eq!(p.shape_constants, vec![("dim".into(), 393216)]);
    }

    #[test]
    fn sizes_written_as_products_or_chained_assignments_are_read() {
        let src = SOFTMAX
            .replace("batch_size = 4096", "batch_size = 2048 * 2")
            .replace("dim = 393216  # wide", "dim = width = 128")
            .replace(
                "torch.rand(batch_size, dim)",
                "torch.rand(batch_size, dim, width)",
            );
        let p = read(&src).unwrap();
        assert_eq!(
            p.shape_constants,
            vec![
                ("batch_size".into(), 4096),
                ("dim".into(), 128),
                ("width".into(), 128)
            ]
        );
    }

    #[test]
    fn model_new_renames_the_class_and_its_super_calls_only() {
        let p = read(&SOFTMAX.replace("import torch\n", "import torch\n# Model docs\n")).unwrap();
        let new = p.model_new();
        assert!(new.contains("class ModelNew(nn.Module):"));
        assert!(new.contains("super(ModelNew, self).__init__()"));
        assert!(new.contains("# Model docs"));
        assert!(!new.contains("class Model("));
    }

    #[test]
    fn a_file_without_the_interface_is_skipped_with_the_missing_part_named() {
        let no_class = SOFTMAX.replace("class Model(", "class Other(");
        assert!(read(&no_class).unwrap_err().reason.contains("class Model"));
        let no_inputs = SOFTMAX.replace("def get_inputs(", "def inputs(");
        assert!(read(&no_inputs)
            .unwrap_err()
            .reason
            .contains("get_inputs()"));
        let no_init = SOFTMAX.replace("def get_init_inputs(", "def init(");
        assert!(read(&no_init)
            .unwrap_err()
            .reason
            .contains("get_init_inputs()"));
    }
}
