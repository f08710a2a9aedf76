//! A scripted session: the model's turns, in order.
//!
//! ```toml
//! [[turn]]
//! tool = "Read"
//! input = { file_path = "/workspace/source/kernel.py" }
//!
//! [[turn]]
//! text = "Done."
//! ```
//!
//! A request is answered with the turn after the assistant turns it already holds, so a CLI
//! that asks again (a retry) gets the same answer, and a session's requests need no state.

use std::path::Path;

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// One model turn: a tool call (`tool` with its `input`), or `text`, which ends the session.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub input: Option<serde_json::Value>,
    #[serde(default)]
    pub text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(rename = "turn", default)]
    pub turns: Vec<Turn>,
}

/// What the script says once its turns are spent (the CLI asked once more).
pub const ENDED: &str = "The scripted session has ended.";

impl Script {
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Script::parse(&text, &path.display().to_string())
    }

    /// Parses a script; `origin` names it in errors. Each turn is exactly one of a tool call
    /// (with an object `input`) or text.
    pub fn parse(text: &str, origin: &str) -> Result<Script, ScriptError> {
        let bad = |message: String| ScriptError::Invalid {
            path: origin.to_string(),
            message,
        };
        let script: Script = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if script.turns.is_empty() {
            return Err(bad("no [[turn]]: a script needs at least one".into()));
        }
        for (i, t) in script.turns.iter().enumerate() {
            match (&t.tool, &t.input, &t.text) {
                (Some(name), Some(serde_json::Value::Object(_)), None) if !name.is_empty() => {}
                (Some(_), _, None) => {
                    return Err(bad(format!(
                        "turn[{i}]: a tool call needs a tool name and an `input` table"
                    )))
                }
                (None, None, Some(_)) => {}
                _ => {
                    return Err(bad(format!(
                        "turn[{i}]: one of `tool` (with `input`) or `text`, not both or neither"
                    )))
                }
            }
        }
        Ok(script)
    }

    /// The turn answering a request that already holds `done` assistant turns; past the end,
    /// text that ends the session.
    pub fn turn(&self, done: usize) -> Turn {
        self.turns.get(done).cloned().unwrap_or(Turn {
            tool: None,
            input: None,
            text: Some(ENDED.into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_a_tool_call_or_text_and_nothing_else() {
        let s = Script::parse(
            "[[turn]]\ntool = \"Read\"\ninput = { file_path = \"/w/k.py\" }\n[[turn]]\ntext = \"done\"\n",
            "s.toml",
        )
        .unwrap();
        assert_eq!(s.turn(0).tool.as_deref(), Some("Read"));
        assert_eq!(s.turn(1).text.as_deref(), Some("done"));
        assert_eq!(s.turn(7).text.as_deref(), Some(ENDED));
        for (text, says) in [
            ("", "no [[turn]]"),
            ("[[turn]]\ntool = \"Read\"\n", "turn[0]: a tool call needs"),
            (
                "[[turn]]\ntool = \"Read\"\ninput = 3\n",
                "turn[0]: a tool call needs",
            ),
            (
                "[[turn]]\ntext = \"a\"\ntool = \"Read\"\ninput = {}\n",
                "turn[0]: one of",
            ),
            ("[[turn]]\nwords = \"a\"\n", "unknown field"),
        ] {
            let e = Script::parse(text, "bad.toml").unwrap_err().to_string();
            assert!(
                e.starts_with("bad.toml: ") && e.contains(says),
                "{text:?}: {e}"
            );
        }
    }
}
