//! Dimension roles and constraints of a shape list, inferred from its names and its visible
//! configurations, so that an unseen set varies only problem sizes and never leaves what every
//! visible configuration obeys:
//! - a value named like a launch parameter (block size, warps, stages, group size, top-k,
//!   seed, a flag) or an integer that sizes a weight (`get_init_inputs()` uses it) is kept as
//!   one visible configuration has it, together with the other kept values of that entry;
//! - a problem dimension stays a multiple of the largest power of two that divides all of its
//!   visible values (at most 256; at most 16 when only one value is visible, which says little
//!   about what is required; at most a quarter of its smallest visible value, since a doubling
//!   series of sizes is all multiples of its first), and at least that;
//! - dimensions equal in every visible configuration (two or more) stay equal — except where
//!   every dimension equals every other (a cube, a square GEMM): that is the test author's
//!   choice of sizes as often as the kernel's need, so the asymmetric category alone may break
//!   it, and each configuration that does says so (`breaks_tie`), for a probe to settle;
//! - a string leaf named `name`/`label`/`id` is a label and gets the configuration's own.

use crate::shapes::Value;

/// Names for the components of a declaration's entries, from the code around it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hints {
    /// Names of an entry's top-level components, in order (parametrize argument names,
    /// `for (M, N, K) in SHAPES` unpacking, `get_inputs()` constant names).
    pub names: Vec<String>,
    /// Names the code fixes whatever their look (constants `get_init_inputs()` uses).
    pub fixed: Vec<String>,
}

/// Why a leaf is not varied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Dimension,
    Launch,
    Weight,
    Flag,
    Label,
    Other,
}

/// The leaf names of an entry shaped like `template`: dict keys, hint names for top-level
/// components, `parent[i]` below, `#i` where nothing names a component.
pub(crate) fn leaf_names(template: &Value, hints: &Hints) -> Vec<String> {
    fn walk(v: &Value, name: String, out: &mut Vec<String>) {
        match v {
            Value::Tuple(xs) | Value::List(xs) => {
                for (i, x) in xs.iter().enumerate() {
                    walk(x, format!("{name}[{i}]"), out);
                }
            }
            Value::Dict(items) => {
                for (k, x) in items {
                    walk(x, k.clone(), out);
                }
            }
            _ => out.push(name),
        }
    }
    let top = |i: usize| hints.names.get(i).cloned().unwrap_or(format!("#{i}"));
    let mut out = Vec::new();
    match template {
        Value::Tuple(xs) | Value::List(xs) => {
            for (i, x) in xs.iter().enumerate() {
                walk(x, top(i), &mut out);
            }
        }
        other => walk(other, top(0), &mut out),
    }
    out
}

/// The role a leaf's name gives it (a dimension unless the name says otherwise).
pub fn role(name: &str, value: &Value, hints: &Hints) -> Role {
    let n = name.to_ascii_lowercase();
    let word = |w: &str| {
        n.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|p| p == w)
    };
    match value {
        Value::Str(_) if matches!(n.as_str(), "name" | "label" | "id" | "case" | "tag") => {
            return Role::Label
        }
        Value::Int(_) => {}
        _ => return Role::Other,
    }
    if hints.fixed.iter().any(|f| f == name) {
        Role::Weight
    } else if n.contains("block")
        || n.contains("blk")
        || n.contains("tile")
        || n.contains("warp")
        || n.contains("stage")
        || n.contains("group")
        || n.contains("topk")
        || n.contains("top_k")
        || n.contains("seed")
        || n.contains("split")
        || word("bm")
        || word("bn")
        || word("bk")
    {
        Role::Launch
    } else if [
        "is_",
        "use_",
        "has_",
        "enable",
        "causal",
        "flag",
        "transpose",
    ]
    .iter()
    .any(|p| n.starts_with(p) || n.contains(p))
    {
        Role::Flag
    } else {
        Role::Dimension
    }
}

/// A problem dimension and what it must keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dim {
    pub pos: usize,
    pub name: String,
    pub multiple: i64,
    /// The first dimension it equals in every visible configuration, if not itself.
    pub same_as: Option<usize>,
}

/// The inferred rules of one form of entries (their flattened leaves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    pub dims: Vec<Dim>,
    /// Leaves kept as a visible configuration has them (launch parameters, weights, flags).
    pub kept: Vec<(usize, String, Role)>,
    pub labels: Vec<usize>,
}

fn pow2_part(v: i64) -> i64 {
    if v <= 0 {
        1
    } else {
        1 << v.trailing_zeros()
    }
}

/// The largest power of two not above `v` (1 for anything below 2).
fn floor_pow2(v: i64) -> i64 {
    if v < 2 {
        1
    } else {
        1 << (63 - v.leading_zeros())
    }
}

impl Rules {
    pub fn infer(flats: &[Vec<Value>], names: &[String], hints: &Hints) -> Rules {
        let first = &flats[0];
        let (mut dims, mut kept, mut labels) = (Vec::new(), Vec::new(), Vec::new());
        for (pos, leaf) in first.iter().enumerate() {
            let name = names.get(pos).cloned().unwrap_or(format!("#{pos}"));
            let values: Vec<i64> = flats.iter().filter_map(|f| f[pos].as_int()).collect();
            match role(&name, leaf, hints) {
                Role::Label => labels.push(pos),
                Role::Other => {}
                Role::Dimension => {
                    let common = values.iter().map(|&v| pow2_part(v)).min().unwrap_or(1);
                    let distinct = values.iter().any(|&v| v != values[0]);
                    let smallest = values.iter().copied().min().unwrap_or(1);
                    // Sizes that double from one visible configuration to the next are
                    // all multiples of the smallest: that says they double, not that the
                    // smallest is a required step. A quarter of it is kept.
                    let multiple = common
                        .min(if distinct { 256 } else { 16 })
                        .min(floor_pow2(smallest / 4))
                        .max(1);
                    let same_as = if flats.len() >= 2 {
                        dims.iter()
                            .find(|d: &&Dim| {
                                d.same_as.is_none()
                                    && flats.iter().all(|f| f[d.pos].as_int() == f[pos].as_int())
                            })
                            .map(|d| d.pos)
                    } else {
                        None
                    };
                    dims.push(Dim {
                        pos,
                        name,
                        multiple,
                        same_as,
                    });
                }
                r => kept.push((pos, name, r)),
            }
        }
        Rules { dims, kept, labels }
    }

    /// The positions that may be varied (one per class of equal dimensions).
    pub fn free(&self) -> Vec<usize> {
        self.dims
            .iter()
            .filter(|d| d.same_as.is_none())
            .map(|d| d.pos)
            .collect()
    }

    /// Whether every problem dimension equals another in every visible configuration (a
    /// cube): one may vary, so no aspect ratio can change.
    pub fn tied(&self) -> bool {
        self.free().len() == 1 && self.dims.len() > 1
    }

    /// The same rules without the equalities: what an asymmetric configuration of a cube
    /// keeps (multiples, launch parameters, weights, flags).
    pub fn untied(&self) -> Rules {
        let mut r = self.clone();
        for d in &mut r.dims {
            d.same_as = None;
        }
        r
    }

    /// What a configuration breaking a cube's tie breaks, in words (`M = N = K in every
    /// visible configuration`); None where the rules are no cube.
    pub fn tie(&self) -> Option<String> {
        self.tied().then(|| {
            let names: Vec<&str> = self.dims.iter().map(|d| d.name.as_str()).collect();
            format!("{} in every visible configuration", names.join(" = "))
        })
    }

    pub fn multiple_of(&self, pos: usize) -> i64 {
        self.dims
            .iter()
            .find(|d| d.pos == pos)
            .map_or(1, |d| d.multiple)
    }

    /// Moves each dimension to the nearest value it may take and copies equal dimensions.
    pub fn snap(&self, f: &mut [Value]) {
        for d in &self.dims {
            if let (None, Some(v)) = (d.same_as, f[d.pos].as_int()) {
                let m = d.multiple;
                f[d.pos] = Value::Int((((v + m / 2) / m) * m).max(m));
            }
        }
        for d in &self.dims {
            if let Some(src) = d.same_as {
                f[d.pos] = f[src].clone();
            }
        }
    }

    /// What `f` breaks of the rules (empty when it keeps them all); `visible` are the flattened
    /// visible configurations the rules came from.
    pub fn violations(&self, f: &[Value], visible: &[Vec<Value>]) -> Vec<String> {
        let mut out = Vec::new();
        for d in &self.dims {
            match f[d.pos].as_int() {
                Some(v) if v < 1 || v % d.multiple != 0 => out.push(format!(
                    "{} = {v}: every visible value is a positive multiple of {}",
                    d.name, d.multiple
                )),
                None => out.push(format!("{}: not an integer", d.name)),
                _ => {}
            }
            if let Some(src) = d.same_as {
                if f[src] != f[d.pos] {
                    out.push(format!(
                        "{} differs from {}, which it equals in every visible configuration",
                        d.name,
                        self.dims[self.dims.iter().position(|x| x.pos == src).unwrap_or(0)].name
                    ));
                }
            }
        }
        if !self.kept.is_empty() {
            let kept = |g: &[Value]| {
                self.kept
                    .iter()
                    .map(|(p, ..)| g[*p].clone())
                    .collect::<Vec<_>>()
            };
            if !visible.iter().any(|v| kept(v) == kept(f)) {
                let names: Vec<&str> = self.kept.iter().map(|(_, n, _)| n.as_str()).collect();
                out.push(format!(
                    "{} together are not as any visible configuration has them",
                    names.join(", ")
                ));
            }
        }
        out
    }
}
