//! Arguments of `arenactl unseen …`: hidden sets of unseen configurations.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{JsonFlag, RunnerAddr, RunnerArgs};
use crate::arg_parse;

#[derive(Debug, Subcommand)]
pub enum UnseenCommand {
    /// Generate a sealed set of unseen configurations for the tasks at or below each DIR.
    Generate(Box<UnseenGenerateArgs>),
    /// Check every file of a set against its manifest and print the set digest.
    Digest {
        /// The sealed set (`unseen generate --out`).
        #[arg(value_name = "HIDDEN_DIR")]
        dir: PathBuf,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Evaluate a finished run on a sealed hidden set: the original and the agent's kernel
    /// of every finished task run, in evaluator containers only; results name the set digest.
    Eval(Box<UnseenEvalArgs>),
}

// Agents do not run here: their flags are hidden (cli::command, AGENT_FLAGS). A runner is
// used only to probe.
#[derive(Debug, Args)]
#[command(
    mut_arg("runner", |a| a.requires("probe")),
    mut_arg("token_file", |a| a.requires("probe")),
)]
pub struct UnseenGenerateArgs {
    /// Task directories: the tasks at or below each get configurations (ids as
    /// `task list` prints them).
    #[arg(value_name = "DIR", required_unless_present = "tasks")]
    pub dirs: Vec<PathBuf>,
    /// Task directories, as the positional DIRs (the older spelling).
    #[arg(long = "tasks", num_args = 1.., value_name = "DIR", hide = true)]
    pub tasks: Vec<PathBuf>,
    /// Seed of the generator: the same seed, tasks and options make the same set.
    #[arg(long)]
    pub seed: u64,
    /// New, empty directory for the set.
    #[arg(short = 'o', long, value_name = "HIDDEN_DIR")]
    pub out: PathBuf,
    /// Configurations to seal per task.
    #[arg(long, default_value_t = 8, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub per_task: usize,
    /// Estimated device memory a configuration may need, in GiB.
    #[arg(long, default_value_t = 8, value_name = "GIB")]
    pub memory_budget_gib: u64,
    /// Most work (product of the dimensions) relative to the largest visible shape.
    #[arg(long, default_value_t = 16.0, value_name = "X", value_parser = arg_parse::positive_f64)]
    pub max_scale: f64,
    /// Probe before sealing: the original kernel runs every candidate configuration in its
    /// task's image of this lockfile (on this machine's GPUs); what it fails is dropped and
    /// more are made. Every task must be locked with the tree under DIR.
    #[arg(long, value_name = "LOCKFILE")]
    pub probe: Option<PathBuf>,
    /// Rounds of generation and probing at most, for tasks left short of passing configurations.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10))]
    pub probe_rounds: u32,
    #[command(flatten)]
    pub remote: RunnerAddr,
    #[command(flatten)]
    pub local: RunnerArgs,
    #[command(flatten)]
    pub json: JsonFlag,
}

impl UnseenGenerateArgs {
    /// The task directories, however they were given.
    pub fn task_dirs(&self) -> Vec<PathBuf> {
        self.dirs.iter().chain(&self.tasks).cloned().collect()
    }
}

#[derive(Debug, Args)]
pub struct UnseenEvalArgs {
    /// The run directory of `arenactl run`.
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// The sealed hidden set.
    #[arg(long, value_name = "HIDDEN_DIR")]
    pub unseen: PathBuf,
    #[command(flatten)]
    pub remote: RunnerAddr,
    #[command(flatten)]
    pub local: RunnerArgs,
    #[command(flatten)]
    pub out_format: JsonFlag,
}
