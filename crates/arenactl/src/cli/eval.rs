//! `arenactl eval` (one candidate through the runner's Evaluate API) and the Evaluate API's
//! settings of `arenactl runner serve`.

use std::path::PathBuf;

use clap::Args;

use super::{JsonFlag, RunnerAddr, RunnerArgs};

// No agent runs here: the agent flags of the runner a command starts are hidden
// (cli::command, AGENT_FLAGS).
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The lockfile that pins the task and its image (read on the runner's machine).
    #[arg(long, value_name = "FILE")]
    pub image_lock: PathBuf,
    /// The task: its id in the lockfile, or its locked digest (sha256:…).
    #[arg(long, value_name = "ID|sha256:…")]
    pub task: String,
    /// The candidate: `PATH=FILE` (the task's agent file PATH gets FILE's content;
    /// repeatable), or `FILE` alone where the task has one agent file. Agent files left out
    /// are the original's.
    #[arg(long = "candidate", required = true, value_name = "PATH=FILE")]
    pub candidates: Vec<String>,
    /// How long the evaluation may take, queueing included, in seconds (default: twice the
    /// task's gate timeouts).
    #[arg(long, value_name = "SECONDS", value_parser = crate::arg_parse::positive_f64)]
    pub timeout: Option<f64>,
    /// Most pairs of timed batches per configuration, where arena's trusted evaluator measures
    /// the task (default 10), one per session of fresh kernel processes, stopping once the
    /// speedup's interval is within 5 % of its median, but not before 10 sessions on the CPU
    /// or 5 on a GPU. Fewer is cheaper and noisier, and the interval widens to say so: for smoke
    /// runs and adversary suites, not for numbers you publish. The result's cases hold every
    /// pair and where the pairs stopped.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub trusted_pairs: Option<u32>,
    /// Outputs of each timed batch checked against the reference on a GPU, a secret sample
    /// (default 64; 0: every one). The correctness gate checks every output whatever it is.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=arena_run::plan::MAX_CHECKED_CALLS as i64))]
    pub checked_calls: Option<u32>,
    /// A name for the request, echoed in the answer.
    #[arg(long, default_value = "", value_name = "NAME")]
    pub request_id: String,
    #[command(flatten)]
    pub remote: RunnerAddr,
    #[command(flatten)]
    pub local: RunnerArgs,
    #[command(flatten)]
    pub out: JsonFlag,
}

/// How a runner serves the Evaluate API.
#[derive(Debug, Args, Clone)]
pub struct EvalPoolArgs {
    /// Evaluate requests queued or running at once; more are refused at once
    /// (RESOURCE_EXHAUSTED).
    #[arg(long, default_value_t = 256, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub eval_queue: usize,
    /// Seconds an idle warm evaluator keeps its GPU before it is stopped.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS", value_parser = crate::arg_parse::non_negative_f64)]
    pub eval_idle: f64,
    /// Where warm evaluators and staged candidates live (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    pub eval_dir: Option<PathBuf>,
}

impl EvalPoolArgs {
    pub fn settings(&self) -> arena_runner::evaluate::EvalSettings {
        arena_runner::evaluate::EvalSettings {
            pool: arena_runner::evaluate::PoolSettings {
                limit: self.eval_queue.max(1),
                idle: std::time::Duration::from_secs_f64(self.eval_idle.max(0.0)),
                ..Default::default()
            },
            dir: self.eval_dir.clone(),
        }
    }
}
