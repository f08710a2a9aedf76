//! arena-endpoint: a scripted model endpoint for tests.
//!
//! A real agent CLI (Claude Code, through the Anthropic Messages API; Codex, through the OpenAI
//! Responses API) runs a whole session against it: each request gets the
//! script's next model turn (a tool call, or text that ends the session), so the CLI reads the
//! task, edits the kernel file and runs the task's check with its own tools, and arena scores
//! what it wrote. Every request is recorded (its path, its API key, its body) for the test to
//! check. [`Endpoint::start_in_netns`] serves from a network namespace of the test's own, the
//! "test host" an agent's egress network reaches, never through the host.

pub mod messages;
pub mod responses;
pub mod script;
pub mod server;
mod sse;

pub use script::{Script, ScriptError, Turn};
pub use server::{Endpoint, Recorded};
