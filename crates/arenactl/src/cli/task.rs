//! Arguments of `arenactl task …`.

use std::path::PathBuf;

use clap::Subcommand;

use super::JsonFlag;

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// List the tasks at or below each directory, with ids relative to their task set's root
    /// (the directory above the task-type directory: `tasks` for
    /// tasks/python2python/arena/matmul), whatever directory is named.
    List {
        /// Task directories, or directories holding task directories.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Show one task: its id (relative to --root) or its directory.
    Show {
        /// The task's id (relative to --root) or its directory.
        #[arg(value_name = "ID|DIR")]
        id: String,
        /// Tasks root the id is relative to.
        #[arg(long, default_value = "tasks", value_name = "DIR")]
        root: PathBuf,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Validate every task at or below each directory (exit 1 if any is invalid).
    Validate {
        /// Task directories, or directories holding task directories.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Copy AgentKernelArena tasks with their perf helpers put in (as AKA's setup_workspace()
    /// does, byte for byte), so that their digests cover the helpers they time with.
    Materialize {
        /// An AgentKernelArena checkout (its src/tools/perf/ holds the helpers).
        #[arg(long, value_name = "DIR")]
        aka_root: PathBuf,
        /// A new directory for the copies (ids as under each DIR).
        #[arg(short = 'o', long, value_name = "OUT")]
        out: PathBuf,
        /// arena's trusted harnesses (`<DIR>/<task id>.py`, as in tasks/aka-harnesses): a
        /// task that has one gets it as arena_harness.py, named `trusted_harness` in its
        /// config.yaml, so that arena's evaluator times it from outside.
        #[arg(long, value_name = "DIR")]
        harnesses: Option<PathBuf>,
        /// Write no derived harness: a task without one of arena's stays self-reported, and
        /// the copies are byte for byte what AgentKernelArena's own materializer writes.
        #[arg(long)]
        no_derive: bool,
        /// AgentKernelArena task directories to copy.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Turn another benchmark's problems into arena tasks (`kernelbench`: KernelBench's
    /// `Model`/`get_inputs`/`get_init_inputs` files, each a task the trusted evaluator runs).
    Import {
        /// The other benchmark's format.
        #[arg(value_enum, value_name = "FORMAT")]
        format: ImportFormat,
        /// The problems: a KernelBench checkout or its KernelBench/ directory (every `.py`
        /// file directly in a `level<N>` directory below it).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// A new (or empty) directory for the tasks, one per problem: OUT/level<N>/<name>.
        #[arg(short = 'o', long, value_name = "OUT")]
        out: PathBuf,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Print the content digest of every task at or below each directory.
    Digest {
        /// Task directories, or directories holding task directories.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        #[command(flatten)]
        out: JsonFlag,
    },
}

/// Formats `arenactl task import` reads.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ImportFormat {
    /// KernelBench's problems (github.com/ScalingIntelligence/KernelBench).
    Kernelbench,
}
