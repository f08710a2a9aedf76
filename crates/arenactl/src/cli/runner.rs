//! Arguments of `arenactl runner …`: the daemon, its one-shot mode, and what a client asks it.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{EvalPoolArgs, JsonFlag, Listen, RunnerArgs};
use crate::arg_parse;

/// Where `arenactl runner serve` listens unless told otherwise, and where clients look.
pub const DEFAULT_RUNNER: &str = "unix:/run/arena/runner.sock";

/// A runner elsewhere.
#[derive(Debug, Args, Clone)]
pub struct Remote {
    /// unix:PATH (its socket) or http://HOST:PORT (with --token-file) [default: `runner` of
    /// the config file, else unix:/run/arena/runner.sock].
    #[arg(long, value_name = "ADDR", value_parser = arg_parse::runner_addr)]
    pub runner: Option<String>,
    /// The bearer token for a runner over TCP (a file holding it; or
    /// ARENA_RUNNER_TOKEN_FILE, or `token_file` of the config file).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum RunnerCommand {
    /// Serve arena.v1.Runner until interrupted: on a unix socket (the default; callers are
    /// named by the kernel, `uid:N`) or on TCP with bearer tokens (`token:NAME`).
    Serve {
        /// unix:PATH (mode 660) or HOST:PORT (needs --token-file).
        #[arg(long, default_value = DEFAULT_RUNNER, value_name = "ADDR")]
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
        #[arg(long = "admin", value_name = "IDENTITY", value_parser = arg_parse::identity)]
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
    /// the run directory. SIGTERM (scancel, time limit) removes its containers. Plumbing
    /// of `run --backend slurm`, hidden from help.
    #[command(hide = true)]
    Exec {
        /// The run directory the head recorded.
        #[arg(long, value_name = "DIR")]
        run_dir: PathBuf,
        /// The task id to run.
        #[arg(long)]
        task: String,
        /// Which repeat of the task (0-based).
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
        /// The run's id (`arenactl run` prints it).
        run_id: String,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// A run's state on a runner (its owner's or an admin's).
    Status {
        /// The run's id (`arenactl run` prints it).
        run_id: String,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Cancel a run on a runner (its owner or an admin): its containers are killed and
    /// removed; the same `arenactl run` resumes it.
    Cancel {
        /// The run's id (`arenactl run` prints it).
        run_id: String,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: JsonFlag,
    },
}
