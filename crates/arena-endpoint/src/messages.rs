//! The Anthropic Messages API's shapes, as much of them as a scripted turn needs: a message
//! with one content block (text, or a tool call), whole or as its stream of server-sent events.

use serde_json::{json, Value};

use crate::script::Turn;

/// How many assistant turns a request's `messages` already hold: which turn answers it.
pub fn turns_done(request: &Value) -> usize {
    request
        .get("messages")
        .and_then(|m| m.as_array())
        .map_or(0, |m| {
            m.iter()
                .filter(|x| x.get("role").and_then(|r| r.as_str()) == Some("assistant"))
                .count()
        })
}

/// The content block of `turn` (`done` numbers its tool call's id) and its stop reason.
fn block(turn: &Turn, done: usize) -> (Value, &'static str) {
    match (&turn.tool, &turn.text) {
        (Some(name), _) => (
            json!({"type": "tool_use", "id": format!("toolu_arena_{done:04}"), "name": name,
                   "input": turn.input.clone().unwrap_or_else(|| json!({}))}),
            "tool_use",
        ),
        (None, text) => (
            json!({"type": "text", "text": text.clone().unwrap_or_default()}),
            "end_turn",
        ),
    }
}

fn usage(output: usize) -> Value {
    json!({"input_tokens": 1, "output_tokens": output, "cache_creation_input_tokens": 0,
           "cache_read_input_tokens": 0})
}

fn message_id(done: usize) -> String {
    format!("msg_arena_{done:04}")
}

/// The whole message answering a request (`stream: false`).
pub fn message(turn: &Turn, done: usize, model: &str) -> Value {
    let (content, stop) = block(turn, done);
    json!({"id": message_id(done), "type": "message", "role": "assistant", "model": model,
           "content": [content], "stop_reason": stop, "stop_sequence": null, "usage": usage(1)})
}

/// The same message as the event stream a `stream: true` request reads: the block opened
/// empty, its content in one delta (a tool call's input as JSON text), then the stop.
pub fn events(turn: &Turn, done: usize, model: &str) -> String {
    let (content, stop) = block(turn, done);
    let (start, delta) = match content["type"].as_str() {
        Some("tool_use") => (
            json!({"type": "tool_use", "id": content["id"], "name": content["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": content["input"].to_string()}),
        ),
        _ => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": content["text"]}),
        ),
    };
    let events = [
        json!({"type": "message_start", "message": {"id": message_id(done), "type": "message",
               "role": "assistant", "model": model, "content": [], "stop_reason": null,
               "stop_sequence": null, "usage": usage(1)}}),
        json!({"type": "content_block_start", "index": 0, "content_block": start}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ];
    crate::sse::stream(&events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_turn_streams_its_input_as_one_json_delta() {
        let t = Turn {
            tool: Some("Write".into()),
            input: Some(json!({"file_path": "/w/k.py", "content": "x = 1\n"})),
            text: None,
        };
        let req = json!({"messages": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]});
        assert_eq!(turns_done(&req), 1);
        let m = message(&t, 1, "m");
        assert_eq!(m["stop_reason"], "tool_use");
        assert_eq!(m["content"][0]["id"], "toolu_arena_0001");
        let s = events(&t, 1, "m");
        let data = crate::sse::data_of(&s);
        assert_eq!(data.len(), 6);
        let partial = data[2]["delta"]["partial_json"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(partial).unwrap(),
            t.input.unwrap()
        );
        assert_eq!(data[4]["delta"]["stop_reason"], "tool_use");
        assert!(s.starts_with("event: message_start\ndata: "));
    }
}
