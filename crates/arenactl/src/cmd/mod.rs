pub mod bundle;
pub mod containerd;
pub mod image;
pub mod score;
pub mod task;
pub mod unseen;

/// Outcome of a command that completed: whether everything it checked was fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Completed, but something it checked is invalid (exit code 1).
    Invalid,
}

pub fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}
