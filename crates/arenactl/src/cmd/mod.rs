pub mod bundle;
pub mod containerd;
pub mod endpoint;
mod engine;
pub mod env;
pub mod eval;
pub mod image;
mod image_store;
pub mod import;
pub mod materialize;
pub mod offline;
mod preflight;
mod reach;
pub mod registry;
pub mod report;
pub mod run;
mod run_follow;
mod run_view;
pub mod runner;
mod runner_exec;
pub mod score;
pub mod slurm;
pub mod task;
mod task_check;
mod task_show;
pub mod unseen;
mod unseen_probe;

use std::path::{Path, PathBuf};

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

/// `p` made absolute (as it is where that cannot be done): what a runner is told.
pub(crate) fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// `runs/<lockfile stem>-<agent name>`: the same command resumes the same run.
pub(crate) fn default_out(args: &crate::cli::RunArgs) -> PathBuf {
    let lock = args
        .image_lock
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into());
    let agent = Path::new(&args.agent)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| args.agent.clone());
    PathBuf::from("runs").join(format!("{lock}-{agent}"))
}
