//! Server-sent events, as both APIs stream them: `event: TYPE` and `data: JSON` per event.

use serde_json::Value;

/// `events` as one event stream, each named by its `type`.
pub fn stream(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// Each event's `data` of a stream, parsed (the tests' reader of [`stream`]).
#[cfg(test)]
pub fn data_of(stream: &str) -> Vec<Value> {
    stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}
