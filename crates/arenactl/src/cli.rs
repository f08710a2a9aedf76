//! Command-line definition. Exit codes: 0 success, 1 invalid input or a failed operation,
//! 2 usage error (clap's own, and every flag value clap can check), 3 partly done (`unseen
//! generate`, `task materialize`: what was left out is named with its reason), 130 a run
//! cancelled by Ctrl-C (resumable).

use std::path::PathBuf;

use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

mod eval;
mod examples;
mod image;
mod listen;
mod offline;
mod report;
mod run;
mod runner;
mod task;
#[cfg(test)]
mod tests;
mod unseen;
pub use eval::{EvalArgs, EvalPoolArgs};
pub use image::{ImageCommand, PruneArgs, RegistryArgs};
pub use listen::Listen;
pub use offline::OfflineCommand;
pub use report::{CompareArgs, CompareFormat, ReportArgs, ReportFormat};
pub use run::{Backend, RunArgs, RunnerAddr, RunnerArgs, AGENT_FLAGS};
pub use runner::{Remote, RunnerCommand, DEFAULT_RUNNER};
pub use task::{ImportFormat, TaskCommand};
pub use unseen::{UnseenCommand, UnseenEvalArgs, UnseenGenerateArgs};

/// The heading the options every command takes are listed under, after the command's own.
const GLOBAL: &str = "Global options";

#[derive(Debug, Parser)]
#[command(
    name = "arenactl",
    version,
    about = "Benchmark AI coding agents on GPU-kernel optimization",
    after_help = "Defaults for --runner, --token-file and --store can be set in \
                  ~/.config/arena/config.toml (or $ARENA_CONFIG); `arenactl env` lists the \
                  environment variables arena reads."
)]
pub struct Cli {
    /// Logs on stderr (levels from ARENA_LOG, e.g. `info` or `arena_runner=debug`): `text`,
    /// or `json`, one object per line with the run → task → container spans of each event.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, help_heading = GLOBAL)]
    pub log_format: LogFormat,
    /// More log lines on stderr: -v info, -vv debug, -vvv trace (ARENA_LOG, when set, wins).
    #[arg(short, long, global = true, action = ArgAction::Count, conflicts_with = "quiet", help_heading = GLOBAL)]
    pub verbose: u8,
    /// Only errors on stderr: no warnings in the log and no progress bars (ARENA_LOG, when
    /// set, wins for the log).
    #[arg(short, long, global = true, help_heading = GLOBAL)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The parsed command line, with the examples each subcommand's help shows (kept in
    /// one table, examples.rs, and added here so that help and completions see them).
    pub fn parse_with_examples() -> Cli {
        let matches = command().get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut command()).exit())
    }
}

/// The whole command tree: the derived one with every subcommand's examples, and the agent
/// flags hidden where no agent runs.
pub fn command() -> clap::Command {
    let hide = |c: clap::Command| {
        AGENT_FLAGS
            .iter()
            .fold(c, |c, id| c.mut_arg(*id, |a| a.hide(true)))
    };
    examples::add(Cli::command())
        .mut_subcommand("eval", hide)
        .mut_subcommand("unseen", |u| {
            u.mut_subcommand("generate", hide)
                .mut_subcommand("eval", hide)
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for people.
    Text,
    /// One JSON object per line, with spans.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read, validate and digest task directories.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Score task results and print the aggregate table per task type.
    Score(ScoreArgs),
    /// A run's report: one self-contained HTML page with tables and plots (or md, csv, json).
    Report(ReportArgs),
    /// Compare two runs task by task: paired speedups, a significance test, gate flips.
    Compare(CompareArgs),
    /// Build, list, verify and prune images in the content-addressed store.
    #[command(subcommand)]
    Image(ImageCommand),
    /// Build every image of an image set and write its lockfile (also `image lock`).
    Lock(LockArgs),
    /// Move locked images between machines as one file (air-gapped labs).
    #[command(subcommand)]
    Bundle(BundleCommand),
    /// The air-gapped path as one archive: pack a kit on a connected machine, install it on
    /// the offline node (docs/offline.md).
    #[command(subcommand)]
    Offline(OfflineCommand),
    /// Hidden unseen-configuration sets: generate and seal, check a set's digest.
    #[command(subcommand)]
    Unseen(UnseenCommand),
    /// Run agents on tasks: baseline, agent container, evaluator container, per task.
    Run(Box<RunArgs>),
    /// The runner daemon (gRPC) that carries out runs on this machine's GPUs.
    #[command(subcommand)]
    Runner(RunnerCommand),
    /// Evaluate one candidate of one task through a runner's Evaluate API: the candidate
    /// phase of a run (the same evaluator, gates, result record and trust), from warm
    /// evaluators; prints its gates, speedup and score.
    Eval(Box<EvalArgs>),
    /// Stop a run on Slurm: scancel every live job of the run in RUN_DIR (its state stays
    /// for a resume with the same `arenactl run`).
    Cancel {
        /// The run directory of `arenactl run --backend slurm`.
        #[arg(value_name = "RUN_DIR")]
        run_dir: PathBuf,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Remove containers, snapshots and leases that arena left in containerd (after a crash).
    Gc {
        #[command(flatten)]
        containerd: ContainerdArgs,
        /// Remove everything arena holds in the namespace, also what live runs use (default:
        /// only what crashed processes left, or what outlived its deadline).
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// The configuration file and every ARENA_* environment variable arena reads, one line
    /// each.
    Env(JsonFlag),
    /// Print a shell's completion script for arenactl on stdout.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Which containerd to talk to.
#[derive(Debug, Args, Clone)]
pub struct ContainerdArgs {
    /// containerd's socket.
    #[arg(long = "containerd", value_name = "SOCKET", default_value = arena_runtime::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// containerd namespace of arena's images and containers.
    #[arg(long, default_value = arena_runtime::DEFAULT_NAMESPACE)]
    pub namespace: String,
}

#[derive(Debug, Subcommand)]
pub enum BundleCommand {
    /// Write every image of a lockfile, and the lockfile, into one tar (an OCI image layout).
    Export {
        /// The lockfile whose images go into the bundle.
        #[arg(long, value_name = "FILE")]
        image_lock: PathBuf,
        /// The bundle to write.
        #[arg(short = 'o', long = "out", alias = "output", value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Verify a bundle blob by blob and add its images to the store; refuses it whole on any error.
    Import {
        /// The bundle (`bundle export` wrote it).
        #[arg(value_name = "FILE")]
        bundle: PathBuf,
        /// Also write the bundle's lockfile here.
        #[arg(long, value_name = "FILE")]
        lock_out: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
}

#[derive(Debug, Args)]
pub struct LockArgs {
    /// Image set to lock (a `[[set]]` of the sets file).
    #[arg(long, default_value = "cpu")]
    pub set: String,
    /// The sets file.
    #[arg(long, default_value = "images/sets.toml", value_name = "FILE")]
    pub sets: PathBuf,
    /// Lockfile to write (default: lockfiles/SET.lock).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Resolve a base recipe's registry tag again instead of keeping the digest the lockfile
    /// pinned on first lock.
    #[arg(long)]
    pub update_pins: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// Where images are stored and where pinned .deb files and wheels are found.
#[derive(Debug, Args, Clone)]
pub struct StoreArgs {
    /// Store directory (default: $ARENA_STORE, else `store` of the config file, else
    /// ~/.cache/arena/store).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Directory of pinned .deb files (default: $ARENA_DEB_DIR, else ~/.cache/arena/debs).
    #[arg(long, value_name = "DIR")]
    pub deb_dir: Option<PathBuf>,
    /// Directory of pinned wheels (default: $ARENA_WHEEL_DIR, else ~/.cache/arena/wheels).
    #[arg(long, value_name = "DIR")]
    pub wheel_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print machine-readable JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// results.json files (a result set, a list of task results, or one task result).
    #[arg(required = true, value_name = "RESULTS.json")]
    pub files: Vec<PathBuf>,
    /// Print the aggregate table as CSV.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Score only the task runs arena's trusted evaluator measured (the self-reported ones are
    /// counted above the tables, in no row).
    #[arg(long)]
    pub trusted_only: bool,
    #[command(flatten)]
    pub out: JsonFlag,
}
