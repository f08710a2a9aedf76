pub mod bundle;
pub mod containerd;
pub mod endpoint;
pub mod eval;
pub mod image;
pub mod import;
pub mod materialize;
pub mod registry;
pub mod report;
pub mod run;
mod run_view;
pub mod runner;
pub mod score;
pub mod slurm;
pub mod task;
pub mod unseen;
mod unseen_probe;

/// Outcome of a command that completed: whether everything it checked was fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Completed, but something it checked is invalid (exit code 1).
    Invalid,
    /// Interrupted and cancelled cleanly (exit code 130, as after SIGINT).
    Cancelled,
    /// Done, but not for everything asked: what was left out is named (exit code 3).
    Partial,
}

pub fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// The async runtime of the commands that talk to containerd or a runner.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}
