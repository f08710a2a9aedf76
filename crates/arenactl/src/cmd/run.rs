//! `arenactl run --image-lock FILE --agent NAME …`: submits a run to a runner — one started
//! in-process on the local containerd, or a remote one (`--runner`) — and follows it
//! (run_follow.rs: progress bars, then the aggregate table). Ctrl-C cancels the run cleanly;
//! the same command again resumes it.

use std::path::{Path, PathBuf};

use arena_proto::v1::{EvaluateUnseenRequest, SubmitRunRequest};

use super::endpoint::{self, Client};
use super::engine::local_engine;
use super::run_follow::{follow, OnInterrupt};
use super::{absolute, default_out, preflight, runtime, Outcome};
use crate::cli::RunArgs;

/// The runner to use and its token file: the flags, else the environment and the config file.
pub(super) fn resolve(
    runner: &Option<String>,
    token_file: &Option<PathBuf>,
) -> anyhow::Result<(Option<String>, Option<PathBuf>)> {
    let runner = crate::config::runner(runner)?;
    // A token is for a runner over TCP: one configured for every command is not read (nor
    // checked) when this one runs a runner in-process.
    let token = match &runner {
        Some(_) => crate::config::token_file(token_file)?,
        None => None,
    };
    preflight::token_file(&token)?;
    Ok((runner, token))
}

pub fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    if args.backend == crate::cli::Backend::Slurm {
        return super::slurm::run(args);
    }
    runtime()?.block_on(run_async(args))
}

/// What keeps an in-process runner serving: its task and its socket's private directory.
type Served = Option<(tokio::task::JoinHandle<()>, tempfile::TempDir)>;

/// A client of the runner at `runner`, or of one served in-process on a socket in a private
/// directory (the single-machine default; it serves as long as the second value lives).
/// `runner` and `token_file` are resolved ([`resolve`]).
pub(super) async fn connect(
    runner: &Option<String>,
    token_file: &Option<PathBuf>,
    local: &crate::cli::RunnerArgs,
) -> anyhow::Result<(Client, Served)> {
    match runner {
        Some(a) => Ok((endpoint::client(a, token_file.as_deref()).await?, None)),
        None => {
            // The directory `arenactl run` is started in holds the agent files it is given
            // (ci/agents mounts ci/solutions): agents may mount from below it.
            let cwd = std::env::current_dir()?;
            let engine = local_engine(local, std::slice::from_ref(&cwd)).await?;
            let (client, server, dir) = endpoint::in_process(engine).await?;
            Ok((client, Some((server, dir))))
        }
    }
}

/// A path as the runner should read it: absolute, resolved here, for a runner on this machine
/// (in-process or on a unix socket); for a runner over TCP, which reads paths on its own
/// machine, it must be absolute already.
pub(super) fn runner_path(runner: &Option<String>, p: &Path) -> anyhow::Result<String> {
    match runner {
        Some(r) if !r.starts_with("unix:") => {
            anyhow::ensure!(
                p.is_absolute(),
                "{}: a runner over TCP reads paths on its own machine: give an absolute one",
                p.display()
            );
            Ok(p.display().to_string())
        }
        _ => Ok(absolute(p).display().to_string()),
    }
}

async fn run_async(args: RunArgs) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        args.bundle.is_none(),
        "--bundle is for --backend slurm (jobs filling node-local stores); locally, `arenactl bundle import` it first"
    );
    let (runner, token) = resolve(&args.remote.runner, &args.remote.token_file)?;
    let out = args.out.clone().unwrap_or_else(|| default_out(&args));
    preflight::run(&args, &runner, &out)?;
    let secrets = preflight::read_secrets(&args.secrets)?;
    let path = |p: &Path| runner_path(&runner, p);
    // An agent file given by path (a name is looked up in the runner's agents directory).
    let agent = if Path::new(&args.agent).is_file() || args.agent.contains('/') {
        path(Path::new(&args.agent))?
    } else {
        args.agent.clone()
    };
    let image_lock = path(&args.image_lock)?;
    let run_dir = path(&out)?;
    let hidden_set = args
        .unseen
        .as_deref()
        .map(path)
        .transpose()?
        .unwrap_or_default();
    let (mut client, _server) = connect(&runner, &token, &args.local).await?;
    let submitted = client
        .submit_run(SubmitRunRequest {
            image_lock,
            tasks: args.tasks.clone(),
            agent,
            runs: args.runs,
            run_dir,
            hidden_set,
            memory_bytes: args.memory.unwrap_or(0),
            perf_pairs: args.perf_pairs,
            trusted_pairs: args.trusted_pairs,
            checked_calls: args.checked_calls,
            secrets,
            probe_unseen: false,
        })
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
        .into_inner();
    follow(
        client,
        submitted,
        &out,
        args.out_format.json,
        "task runs",
        OnInterrupt::Cancel,
    )
    .await
}

/// `arenactl unseen eval RUN_DIR --unseen HIDDEN_DIR`.
pub fn unseen_eval(args: crate::cli::UnseenEvalArgs) -> anyhow::Result<Outcome> {
    let (runner, token) = resolve(&args.remote.runner, &args.remote.token_file)?;
    preflight::unseen_eval(&args, &runner)?;
    let run_dir = runner_path(&runner, &args.run_dir)?;
    let hidden_set = runner_path(&runner, &args.unseen)?;
    runtime()?.block_on(async move {
        let (mut client, _server) = connect(&runner, &token, &args.local).await?;
        let submitted = client
            .evaluate_unseen(EvaluateUnseenRequest {
                run_dir,
                hidden_set,
            })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner();
        follow(
            client,
            submitted,
            &args.run_dir,
            args.out_format.json,
            "finished task runs to evaluate on the hidden set",
            OnInterrupt::Cancel,
        )
        .await
    })
}
