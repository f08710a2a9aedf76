//! The OpenAI Responses API's shapes, as much of them as a scripted turn needs (Codex's CLI
//! speaks it): one output item (a message, or a function call), as the event stream a
//! `stream: true` request reads, or whole.

use serde_json::{json, Value};

use crate::script::Turn;

/// How many model turns a request's `input` already holds (assistant messages and function
/// calls): which turn answers it.
pub fn turns_done(request: &Value) -> usize {
    request
        .get("input")
        .and_then(|m| m.as_array())
        .map_or(0, |items| {
            items
                .iter()
                .filter(|x| {
                    let ty = x.get("type").and_then(|t| t.as_str());
                    ty == Some("function_call")
                        || (ty == Some("message")
                            && x.get("role").and_then(|r| r.as_str()) == Some("assistant"))
                })
                .count()
        })
}

/// The output item of `turn` (`done` numbers its ids).
fn item(turn: &Turn, done: usize) -> Value {
    match (&turn.tool, &turn.text) {
        (Some(name), _) => json!({
            "type": "function_call", "id": format!("fc_arena_{done:04}"),
            "call_id": format!("call_arena_{done:04}"), "name": name,
            "arguments": turn.input.clone().unwrap_or_else(|| json!({})).to_string(),
            "status": "completed"}),
        (None, text) => json!({
            "type": "message", "id": format!("msg_arena_{done:04}"), "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text.clone().unwrap_or_default(),
                         "annotations": []}]}),
    }
}

fn response(done: usize, model: &str, output: Vec<Value>, status: &str) -> Value {
    json!({"id": format!("resp_arena_{done:04}"), "object": "response", "model": model,
           "status": status, "output": output,
           "usage": {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
                     "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": 2}})
}

/// The whole response (`stream: false`).
pub fn whole(turn: &Turn, done: usize, model: &str) -> Value {
    response(done, model, vec![item(turn, done)], "completed")
}

/// The event stream: created, the item added and done, completed.
pub fn events(turn: &Turn, done: usize, model: &str) -> String {
    let it = item(turn, done);
    let events = [
        json!({"type": "response.created", "sequence_number": 0,
               "response": response(done, model, vec![], "in_progress")}),
        json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
               "item": it}),
        json!({"type": "response.output_item.done", "sequence_number": 2, "output_index": 0,
               "item": it}),
        json!({"type": "response.completed", "sequence_number": 3,
               "response": response(done, model, vec![it.clone()], "completed")}),
    ];
    crate::sse::stream(&events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_call_turn_is_one_item_with_its_arguments_as_json_text() {
        let t = Turn {
            tool: Some("exec_command".into()),
            input: Some(json!({"cmd": "python3 check.py"})),
            text: None,
        };
        let req = json!({"input": [
            {"type": "message", "role": "developer"}, {"type": "message", "role": "user"},
            {"type": "function_call", "call_id": "c0"}, {"type": "function_call_output", "call_id": "c0"}]});
        assert_eq!(turns_done(&req), 1);
        let s = events(&t, 1, "m");
        let data = crate::sse::data_of(&s);
        assert_eq!(data.len(), 4);
        let done = &data[2]["item"];
        assert_eq!(
            (done["type"].as_str(), done["call_id"].as_str()),
            (Some("function_call"), Some("call_arena_0001"))
        );
        let args: Value = serde_json::from_str(done["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(Some(args), t.input.clone());
        assert_eq!(data[3]["response"]["status"], "completed");
        assert_eq!(whole(&t, 1, "m")["output"][0]["name"], "exec_command");
    }
}
