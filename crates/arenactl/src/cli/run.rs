//! Arguments of `arenactl run` and of the runner a command starts on this machine.

use std::path::PathBuf;

use clap::Args;

use super::{ContainerdArgs, JsonFlag, StoreArgs};
use crate::arg_parse;

/// The flags of [`RunnerArgs`] that only agents use, by id: hidden from the commands that run
/// no agent (cli::command), where they still parse for scripts that pass the same runner
/// flags everywhere.
pub const AGENT_FLAGS: [&str; 4] = [
    "agents_dir",
    "agent_mount_roots",
    "allow_host_network",
    "workspace_size",
];

/// Which runner carries the work out: another (--runner), or one this command starts.
#[derive(Debug, Args, Clone)]
pub struct RunnerAddr {
    /// A runner: unix:PATH (its socket) or http://HOST:PORT (with --token-file); without it
    /// (and without `runner` in the config file) a runner starts in-process on the local
    /// containerd, and ends with this command. Paths are read on the runner's machine.
    #[arg(long, value_name = "ADDR", value_parser = arg_parse::runner_addr)]
    pub runner: Option<String>,
    /// The bearer token for a runner over TCP (a file holding it; or
    /// ARENA_RUNNER_TOKEN_FILE, or `token_file` of the config file).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// Which GPUs a local runner leases, and where agent files are found.
#[derive(Debug, Args, Clone)]
pub struct RunnerArgs {
    /// GPUs: auto, none, cpu:N, fake:N, nvidia:0,1, amd:renderD128,… or cdi:SPEC:DEVICE,… (one task run per GPU).
    /// CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES restrict what auto finds.
    #[arg(long, default_value = "auto", value_name = "SPEC", value_parser = arg_parse::gpus)]
    pub gpus: String,
    /// Directory of agent files (NAME.toml) for --agent NAME.
    #[arg(long, default_value = "agents", value_name = "DIR")]
    pub agents_dir: PathBuf,
    #[command(flatten)]
    pub containerd: ContainerdArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// A host directory agent files may mount from (repeatable). Agents mount nothing
    /// else; the host's system directories never. `arenactl run` without --runner adds the
    /// directory it was started in.
    #[arg(long = "agent-mount-root", value_name = "DIR")]
    pub agent_mount_roots: Vec<PathBuf>,
    /// Let agents with `network = "host"` run (they reach everything the host does).
    #[arg(long)]
    pub allow_host_network: bool,
    /// CPUs each GPU slot's containers may use (default: the host's CPUs over its slots).
    #[arg(long, value_name = "N", value_parser = arg_parse::positive_f64)]
    pub cpus_per_gpu: Option<f64>,
    /// Size of each agent's workspace file system (e.g. 8GiB; default 4GiB).
    #[arg(long, value_name = "SIZE", value_parser = arg_parse::parse_size)]
    pub workspace_size: Option<u64>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lockfile every image is checked against; the run refuses any other digest.
    #[arg(long, value_name = "FILE")]
    pub image_lock: PathBuf,
    /// Tasks to run: ids, prefixes ending in `/`, or `*` (default: every locked task).
    #[arg(long, num_args = 1.., value_name = "SELECTOR")]
    pub tasks: Vec<String>,
    /// Agent: a name under --agents-dir, or an agent file.
    #[arg(long, value_name = "NAME|FILE")]
    pub agent: String,
    /// Repeated runs of every task (for the run-to-run σ).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=arena_run::plan::MAX_RUNS as i64))]
    pub runs: u32,
    /// Run directory (default: runs/<lockfile>-<agent>). The same request on the same
    /// directory resumes the run.
    #[arg(short = 'o', long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub remote: RunnerAddr,
    /// A sealed hidden set of unseen configurations (its digest is recorded with the run).
    #[arg(long, value_name = "HIDDEN_DIR")]
    pub unseen: Option<PathBuf>,
    /// Memory of each container of a task that sets no memory_limit (e.g. 32GiB; default
    /// 16GiB). Recorded with the run.
    #[arg(long, value_name = "SIZE", value_parser = arg_parse::parse_size)]
    pub memory: Option<u64>,
    /// Rounds of paired performance runs for tasks whose harness is their own: the original
    /// kernel and the agent's each run the performance command this many times, interleaved
    /// in one evaluator (default 6, the fewest whose range is a 95% interval). 0: the agent's
    /// kernel timed once, alone, against the baseline evaluation (AgentKernelArena's way).
    /// Recorded with the run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub perf_pairs: Option<u32>,
    /// Most pairs of timed batches per configuration for tasks arena's trusted evaluator
    /// measures (default 10), one per session of fresh kernel processes, stopping once the
    /// speedup's interval is within 5 % of its median, but not before 10 sessions on the CPU
    /// or 5 on a GPU. Fewer is cheaper and noisier, and the interval widens to say so: for smoke
    /// runs, not for numbers you publish. Recorded with the run
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub trusted_pairs: Option<u32>,
    /// Outputs of each timed batch arena's trusted evaluator checks against the reference on
    /// a GPU: a secret sample, drawn before the batch's inputs are made (default 64; 0: every
    /// one: add_rmsnorm's evaluation took 1.4× as long on an H200). The correctness
    /// gate checks every output whatever it is, and so does a CPU evaluation. Recorded with
    /// the run
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=arena_run::plan::MAX_CHECKED_CALLS as i64))]
    pub checked_calls: Option<u32>,
    /// A value the agent file's `secrets` names (an API key), read from FILE by this client
    /// (one trailing newline dropped) and sent with the run (repeatable). It reaches only the
    /// agent's container, where the agent and code it runs can read it; it is written to no
    /// file of the run, so a resumed run needs it again
    #[arg(long = "secret", value_name = "NAME=FILE", value_parser = arg_parse::parse_secret)]
    pub secrets: Vec<(String, PathBuf)>,
    /// Where task runs run: `local` (a runner on this machine, or --runner) or `slurm` (one
    /// sbatch job per task run; the run directory, store and agent file must be on a
    /// filesystem every node sees).
    #[arg(long, value_enum, default_value_t = Backend::Local)]
    pub backend: Backend,
    /// Slurm partition for the jobs.
    #[arg(long)]
    pub partition: Option<String>,
    /// Further sbatch argument for every job (repeatable), e.g. --sbatch-arg=--account=lab.
    #[arg(long = "sbatch-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub sbatch_args: Vec<String>,
    /// Slurm: further jobs for a task run whose job died (node failure, scancel, time limit).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub retries: u32,
    /// Slurm: a bundle (`arenactl bundle export`) each job imports into its node's --store
    /// when that store lacks a locked blob (for node-local stores).
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
    #[command(flatten)]
    pub local: RunnerArgs,
    #[command(flatten)]
    pub out_format: JsonFlag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// A runner on this machine (in-process), or the one --runner names.
    Local,
    /// One sbatch job per task run.
    Slurm,
}
