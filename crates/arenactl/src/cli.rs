//! Command-line definition. Exit codes: 0 success, 1 invalid input or a failed operation,
//! 2 usage error (clap's own), 3 partly done (`unseen generate`, `task materialize`: what was
//! left out is named with its reason), 130 a run cancelled by Ctrl-C (resumable).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod eval;
mod image;
mod listen;
mod offline;
mod report;
mod task;
pub use eval::{EvalArgs, EvalPoolArgs};
pub use image::{ImageCommand, RegistryArgs};
pub use listen::Listen;
pub use offline::OfflineCommand;
pub use report::{CompareArgs, CompareFormat, ReportArgs, ReportFormat};
pub use task::{ImportFormat, TaskCommand};

#[derive(Debug, Parser)]
#[command(
    name = "arenactl",
    version,
    about = "Benchmark AI coding agents on GPU-kernel optimization"
)]
pub struct Cli {
    /// Logs on stderr (levels from ARENA_LOG, e.g. `info` or `arena_runner=debug`): `text`,
    /// or `json`, one object per line with the run → task → container spans of each event.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
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
    /// Build and verify images in the content-addressed store.
    #[command(subcommand)]
    Image(ImageCommand),
    /// Build every image of an image set and write its lockfile.
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
    Run(RunArgs),
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
        #[arg(long, value_name = "FILE")]
        image_lock: PathBuf,
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Verify a bundle blob by blob and add its images to the store; refuses it whole on any error.
    Import {
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
    #[arg(long, value_name = "FILE")]
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
    /// Store directory (default: $ARENA_STORE, else ~/.cache/arena/store).
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
    #[command(flatten)]
    pub out: JsonFlag,
}

#[derive(Debug, Subcommand)]
pub enum UnseenCommand {
    /// Generate a sealed set of unseen configurations for the tasks at or below each DIR.
    Generate(Box<UnseenGenerateArgs>),
    /// Check every file of a set against its manifest and print the set digest.
    Digest {
        #[arg(value_name = "HIDDEN_DIR")]
        dir: PathBuf,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Evaluate a finished run on a sealed hidden set: the original and the agent's kernel
    /// of every finished task run, in evaluator containers only; results name the set digest.
    Eval(Box<UnseenEvalArgs>),
}

#[derive(Debug, Args)]
pub struct UnseenGenerateArgs {
    #[arg(long = "tasks", required = true, num_args = 1.., value_name = "DIR")]
    pub tasks: Vec<PathBuf>,
    #[arg(long)]
    pub seed: u64,
    /// New, empty directory for the set.
    #[arg(long, value_name = "HIDDEN_DIR")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 8)]
    pub per_task: usize,
    /// Estimated device memory a configuration may need, in GiB.
    #[arg(long, default_value_t = 8)]
    pub memory_budget_gib: u64,
    /// Most work (product of the dimensions) relative to the largest visible shape.
    #[arg(long, default_value_t = 16.0)]
    pub max_scale: f64,
    /// Probe before sealing: the original kernel runs every candidate configuration in its
    /// task's image of this lockfile (on this machine's GPUs); what it fails is dropped and
    /// more are made. Every task must be locked with the tree under --tasks.
    #[arg(long, value_name = "LOCKFILE")]
    pub probe: Option<PathBuf>,
    /// Rounds of generation and probing at most, for tasks left short of passing configurations.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub probe_rounds: u32,
    /// A runner for the probe: unix:PATH or http://HOST:PORT (with --token-file); without it
    /// a runner starts in-process.
    #[arg(long, value_name = "ADDR", requires = "probe")]
    pub runner: Option<String>,
    /// The bearer token for a runner over TCP (a file holding it; or ARENA_RUNNER_TOKEN_FILE).
    #[arg(long, value_name = "FILE", requires = "probe")]
    pub token_file: Option<PathBuf>,
    #[command(flatten)]
    pub local: RunnerArgs,
    #[command(flatten)]
    pub json: JsonFlag,
}

#[derive(Debug, Args)]
pub struct UnseenEvalArgs {
    /// The run directory of `arenactl run`.
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// The sealed hidden set.
    #[arg(long, value_name = "HIDDEN_DIR")]
    pub unseen: PathBuf,
    /// A runner: unix:PATH (its socket) or http://HOST:PORT (with --token-file); without it
    /// a runner starts in-process.
    #[arg(long, value_name = "ADDR")]
    pub runner: Option<String>,
    /// The bearer token for a runner over TCP (a file holding it; or ARENA_RUNNER_TOKEN_FILE).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    #[command(flatten)]
    pub local: RunnerArgs,
    #[command(flatten)]
    pub out_format: JsonFlag,
}

/// Which GPUs a local runner leases, and where agent files are found.
#[derive(Debug, Args, Clone)]
pub struct RunnerArgs {
    /// GPUs: auto, none, cpu:N, fake:N, nvidia:0,1, amd:renderD128,… or cdi:SPEC:DEVICE,… (one task run per GPU).
    /// CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES restrict what auto finds.
    #[arg(long, default_value = "auto")]
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
    #[arg(long, value_name = "N")]
    pub cpus_per_gpu: Option<f64>,
    /// Size of each agent's workspace file system (e.g. 8GiB; default 4GiB).
    #[arg(long, value_name = "SIZE", value_parser = crate::arg_parse::parse_size)]
    pub workspace_size: Option<u64>,
}

/// A size such as `16GiB`, `512MiB` or a number of bytes.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lockfile every image is checked against; the run refuses any other digest.
    #[arg(long, value_name = "FILE")]
    pub image_lock: PathBuf,
    /// Tasks to run: ids, prefixes ending in `/`, or `*` (default: every locked task).
    #[arg(long, num_args = 1.., value_name = "SELECTOR")]
    pub tasks: Vec<String>,
    /// Agent: a name under --agents-dir, or an agent file.
    #[arg(long)]
    pub agent: String,
    /// Repeated runs of every task (for the run-to-run σ; 1 to 1000).
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// Run directory (default: runs/<lockfile>-<agent>). The same request on the same
    /// directory resumes the run.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A runner: unix:PATH (its socket) or http://HOST:PORT (with --token-file); without it
    /// a runner starts in-process on the local containerd. Paths are read on the runner's
    /// machine.
    #[arg(long, value_name = "ADDR")]
    pub runner: Option<String>,
    /// The bearer token for a runner over TCP (a file holding it; or ARENA_RUNNER_TOKEN_FILE).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// A sealed hidden set of unseen configurations (its digest is recorded with the run).
    #[arg(long, value_name = "HIDDEN_DIR")]
    pub unseen: Option<PathBuf>,
    /// Memory of each container of a task that sets no memory_limit (e.g. 32GiB; default
    /// 16GiB). Recorded with the run.
    #[arg(long, value_name = "SIZE", value_parser = crate::arg_parse::parse_size)]
    pub memory: Option<u64>,
    /// Rounds of paired performance runs for tasks whose harness is their own: the original
    /// kernel and the agent's each run the performance command this many times, interleaved
    /// in one evaluator (default 6, the fewest whose range is a 95% interval). 0: the agent's
    /// kernel timed once, alone, against the baseline evaluation (AgentKernelArena's way).
    /// Recorded with the run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub perf_pairs: Option<u32>,
    /// Pairs of timed batches per configuration for tasks arena's trusted evaluator measures
    /// (default 10, spread over as many sessions of fresh kernel processes: at most 10 on the
    /// CPU, 5 on a GPU). Fewer is cheaper and noisier, and the interval widens to say so: for
    /// smoke runs, not for numbers you publish. Recorded with the run
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
    #[arg(long = "secret", value_name = "NAME=FILE", value_parser = crate::arg_parse::parse_secret)]
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
    #[arg(long, default_value_t = 1)]
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

/// A runner elsewhere.
#[derive(Debug, Args, Clone)]
pub struct Remote {
    /// unix:PATH (its socket) or http://HOST:PORT (with --token-file).
    #[arg(
        long,
        default_value = "unix:/run/arena/runner.sock",
        value_name = "ADDR"
    )]
    pub runner: String,
    /// The bearer token for a runner over TCP (a file holding it; or ARENA_RUNNER_TOKEN_FILE).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Local,
    Slurm,
}

#[derive(Debug, Subcommand)]
pub enum RunnerCommand {
    /// Serve arena.v1.Runner until interrupted: on a unix socket (the default; callers are
    /// named by the kernel, `uid:N`) or on TCP with bearer tokens (`token:NAME`).
    Serve {
        /// unix:PATH (mode 660) or HOST:PORT (needs --token-file).
        #[arg(
            long,
            default_value = "unix:/run/arena/runner.sock",
            value_name = "ADDR"
        )]
        listen: Listen,
        /// Bearer tokens of TCP callers: one `NAME TOKEN` per line, mode 600.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// The group whose members may open the unix socket (name or gid; default: the
        /// runner's own group).
        #[arg(long, value_name = "GROUP")]
        socket_group: Option<String>,
        /// An identity that may act on every run and name any path (uid:N or token:NAME;
        /// repeatable). root and the runner's own user always may.
        #[arg(long = "admin", value_name = "IDENTITY")]
        admins: Vec<String>,
        /// A directory token callers may name paths below (repeatable).
        #[arg(long = "client-root", value_name = "DIR")]
        client_roots: Vec<PathBuf>,
        #[command(flatten)]
        eval: EvalPoolArgs,
        #[command(flatten)]
        runner: RunnerArgs,
    },
    /// One-shot mode, as a Slurm job runs it: one task run of a recorded run on this node's
    /// containerd and GPU (`--gpus slurm`: the one Slurm assigned), its result written into
    /// the run directory. SIGTERM (scancel, time limit) removes its containers.
    Exec {
        #[arg(long, value_name = "DIR")]
        run_dir: PathBuf,
        #[arg(long)]
        task: String,
        #[arg(long)]
        repeat: u32,
        /// The agent file the run was recorded with.
        #[arg(long)]
        agent: String,
        /// The hidden set the run was recorded with, if any.
        #[arg(long, value_name = "HIDDEN_DIR")]
        unseen: Option<PathBuf>,
        /// A bundle to fill this node's store from when it lacks a locked blob.
        #[arg(long, value_name = "FILE")]
        bundle: Option<PathBuf>,
        #[command(flatten)]
        runner: RunnerArgs,
    },
    /// List a runner's GPUs and what holds each.
    Gpus {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Attach to a run on a runner (its owner or an admin): its history, then live progress
    /// with per-GPU lines and an ETA, then its tables. Ctrl-C detaches; the run goes on.
    Watch {
        run_id: String,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// A run's state on a runner (its owner's or an admin's).
    Status {
        run_id: String,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Cancel a run on a runner (its owner or an admin): its containers are killed and
    /// removed; the same `arenactl run` resumes it.
    Cancel {
        run_id: String,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: JsonFlag,
    },
}
