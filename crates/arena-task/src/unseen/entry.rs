//! The form of an entry: its leaves flattened and rebuilt in the same nesting, a key for
//! entries of the same form, and a generous estimate of the device memory it needs.

use crate::shapes::Value;

/// The flattened form of an entry: integer dimensions and the other leaves (dtypes, flags).
pub(crate) fn leaves(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Tuple(xs) | Value::List(xs) => xs.iter().for_each(|x| leaves(x, out)),
        Value::Dict(items) => items.iter().for_each(|(_, x)| leaves(x, out)),
        other => out.push(other.clone()),
    }
}

/// An entry's leaves, flattened ([`leaves`]).
pub(crate) fn flatten(v: &Value) -> Vec<Value> {
    let mut f = Vec::new();
    leaves(v, &mut f);
    f
}

/// Rebuilds an entry of the same nesting as `template` from flat leaves.
pub(crate) fn rebuild(template: &Value, flat: &mut std::slice::Iter<'_, Value>) -> Value {
    match template {
        Value::Tuple(xs) => Value::Tuple(xs.iter().map(|x| rebuild(x, flat)).collect()),
        Value::List(xs) => Value::List(xs.iter().map(|x| rebuild(x, flat)).collect()),
        Value::Dict(items) => Value::Dict(
            items
                .iter()
                .map(|(k, x)| (k.clone(), rebuild(x, flat)))
                .collect(),
        ),
        _ => flat.next().cloned().unwrap_or(Value::None),
    }
}

pub(crate) fn form(v: &Value) -> String {
    match v {
        Value::Tuple(xs) => format!("({})", xs.iter().map(form).collect::<Vec<_>>().join(",")),
        Value::List(xs) => format!("[{}]", xs.iter().map(form).collect::<Vec<_>>().join(",")),
        Value::Dict(items) => format!(
            "{{{}}}",
            items
                .iter()
                .map(|(k, x)| format!("{k}:{}", form(x)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        Value::Int(_) => "i".into(),
        _ => "v".into(),
    }
}

fn dtype_bytes(leaves: &[Value]) -> u64 {
    for l in leaves {
        if let Value::Str(s) = l {
            let s = s.to_ascii_lowercase();
            if s.contains("16") {
                return 2;
            }
            if s.contains("8") {
                return 1;
            }
            if s.contains("64") {
                return 8;
            }
        }
    }
    4
}

/// A deliberately generous estimate: four tensors the size of the largest product of two
/// dimensions (or of all of them for 1-D and 2-D shapes).
pub fn memory_estimate(flat: &[Value]) -> u64 {
    let dims: Vec<u64> = flat
        .iter()
        .filter_map(|v| v.as_int())
        .map(|i| i.max(1) as u64)
        .collect();
    let elems: u64 = if dims.len() <= 2 {
        dims.iter().product()
    } else {
        let mut best = 1u64;
        for i in 0..dims.len() {
            for j in i + 1..dims.len() {
                best = best.max(dims[i].saturating_mul(dims[j]));
            }
        }
        best
    };
    elems.saturating_mul(dtype_bytes(flat)).saturating_mul(4)
}
