//! Canonical JSON: object keys sorted at every level, no whitespace. oci-spec keeps labels and
//! annotations in HashMaps whose order changes from run to run; sorting makes the bytes, and
//! so the digests, a function of the content alone.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{ImageError, Result};

fn sort(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k, sort(v));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sort).collect()),
        other => other,
    }
}

pub fn canonical_json<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let v = serde_json::to_value(value).map_err(|e| ImageError::invalid("JSON", e.to_string()))?;
    serde_json::to_vec(&sort(v)).map_err(|e| ImageError::invalid("JSON", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn key_order_does_not_matter() {
        let mut a = HashMap::new();
        let mut b = HashMap::new();
        for i in 0..50 {
            a.insert(format!("k{i}"), i);
        }
        for i in (0..50).rev() {
            b.insert(format!("k{i}"), i);
        }
        assert_eq!(canonical_json(&a).unwrap(), canonical_json(&b).unwrap());
        assert_eq!(
            canonical_json(&serde_json::json!({"b": [{"z": 1, "a": 2}], "a": null})).unwrap(),
            br#"{"a":null,"b":[{"a":2,"z":1}]}"#
        );
    }
}
