//! Server-sent events, as both APIs stream them: `event: TYPE` and `data: JSON` per event.

use serde_json::Value;

/// `events` as one event stream, each named by its `type`.
pub fn stream(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}
