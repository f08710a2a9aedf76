//! `arenactl run --image-lock FILE --agent NAME …`: submits a run to a runner — one started
//! in-process on the local containerd, or a remote one (`--runner`) — follows its events with
//! progress bars, and prints the aggregate table. Ctrl-C cancels the run cleanly; the same
//! command again resumes it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use arena_proto::v1::{
    CancelRunRequest, EvaluateUnseenRequest, EventKind, GetRunRequest, RunState, RunStatus,
    SubmitRunRequest, SubmitRunResponse, WatchRunRequest,
};
use arena_report::{Report, ResultSet};
use tokio_stream::StreamExt;

use super::endpoint::{self, Client};
pub(super) use super::run_view::{describe, View};
use super::runner::local_engine;
use super::{print_json, runtime, Outcome};
use crate::cli::RunArgs;

pub(super) fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// `runs/<lockfile stem>-<agent name>`: the same command resumes the same run.
pub(super) fn default_out(args: &RunArgs) -> PathBuf {
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
pub(super) async fn connect(
    runner: &Option<String>,
    token_file: &Option<PathBuf>,
    local: &crate::cli::RunnerArgs,
) -> anyhow::Result<(Client, Served)> {
    match runner {
        Some(a) => Ok((
            endpoint::client(a, endpoint::token_file(token_file).as_deref()).await?,
            None,
        )),
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
    let (mut client, _server) = connect(&args.runner, &args.token_file, &args.local).await?;
    let path = |p: &Path| runner_path(&args.runner, p);
    // An agent file given by path (a name is looked up in the runner's agents directory).
    let agent = if Path::new(&args.agent).is_file() || args.agent.contains('/') {
        path(Path::new(&args.agent))?
    } else {
        args.agent.clone()
    };
    let out = args.out.clone().unwrap_or_else(|| default_out(&args));
    let submitted = client
        .submit_run(SubmitRunRequest {
            image_lock: path(&args.image_lock)?,
            tasks: args.tasks.clone(),
            agent,
            runs: args.runs,
            run_dir: path(&out)?,
            hidden_set: args
                .unseen
                .as_deref()
                .map(path)
                .transpose()?
                .unwrap_or_default(),
            memory_bytes: args.memory.unwrap_or(0),
            perf_pairs: args.perf_pairs,
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

/// `arenactl runner watch RUN_ID`: the same view as the `arenactl run` that submitted it.
pub(super) async fn watch(mut client: Client, run_id: &str, json: bool) -> anyhow::Result<Outcome> {
    let status = client
        .get_run(GetRunRequest {
            run_id: run_id.to_string(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("run {run_id}: {}", s.message()))?
        .into_inner();
    let submitted = SubmitRunResponse {
        run_id: run_id.to_string(),
        total: status.total,
        already_done: 0,
    };
    let dir = PathBuf::from(&status.run_dir);
    follow(
        client,
        submitted,
        &dir,
        json,
        "task runs",
        OnInterrupt::Detach,
    )
    .await
}

/// What Ctrl-C does to a followed run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum OnInterrupt {
    /// The client that submitted it cancels it (state kept for a resume).
    Cancel,
    /// A watcher only stops watching.
    Detach,
}

/// `arenactl unseen eval RUN_DIR --unseen HIDDEN_DIR`.
pub fn unseen_eval(args: crate::cli::UnseenEvalArgs) -> anyhow::Result<Outcome> {
    runtime()?.block_on(async move {
        let (mut client, _server) = connect(&args.runner, &args.token_file, &args.local).await?;
        let submitted = client
            .evaluate_unseen(EvaluateUnseenRequest {
                run_dir: runner_path(&args.runner, &args.run_dir)?,
                hidden_set: runner_path(&args.runner, &args.unseen)?,
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

/// Follows a submitted run's events with progress bars until it ends (Ctrl-C cancels it, or
/// detaches a watcher: then None), and returns its final status.
pub(super) async fn watch_until_end(
    client: &mut Client,
    submitted: &SubmitRunResponse,
    out: &Path,
    json: bool,
    what: &str,
    on_interrupt: OnInterrupt,
) -> anyhow::Result<Option<RunStatus>> {
    let run_id = submitted.run_id.clone();
    let mut view = View::new(json, submitted.total as u64);
    view.note(&format!(
        "run {run_id}: {} {what}, {} finished earlier, directory {}",
        submitted.total,
        submitted.already_done,
        out.display()
    ));

    let mut stream = client
        .watch_run(WatchRunRequest {
            run_id: run_id.clone(),
        })
        .await?
        .into_inner();
    let mut cancelling = false;
    loop {
        tokio::select! {
            ev = stream.next() => match ev {
                Some(Ok(ev)) => {
                    let end = ev.kind == EventKind::RunDone as i32 || ev.kind == EventKind::RunCancelled as i32;
                    view.event(&ev);
                    if end { break; }
                }
                Some(Err(s)) => anyhow::bail!("watching run {run_id}: {}", s.message()),
                None => anyhow::bail!("the runner closed the event stream of run {run_id} early"),
            },
            _ = tokio::signal::ctrl_c(), if !cancelling => {
                if on_interrupt == OnInterrupt::Detach {
                    view.finish();
                    view.note(&format!("detached from run {run_id}; it goes on (`arenactl runner watch {run_id}` to attach again)"));
                    return Ok(None);
                }
                cancelling = true;
                view.note("cancelling: killing the run's containers (state is kept; run the same command to resume)");
                cancel(client, &run_id).await?;
            }
        }
    }
    view.finish();
    let status = client
        .get_run(GetRunRequest {
            run_id: run_id.clone(),
        })
        .await?
        .into_inner();
    Ok(Some(status))
}

/// Follows a submitted run's events with progress bars (Ctrl-C cancels it), then prints the
/// aggregate table (or the JSON report) from its results.
async fn follow(
    mut client: Client,
    submitted: SubmitRunResponse,
    out: &Path,
    json: bool,
    what: &str,
    on_interrupt: OnInterrupt,
) -> anyhow::Result<Outcome> {
    let Some(status) =
        watch_until_end(&mut client, &submitted, out, json, what, on_interrupt).await?
    else {
        return Ok(Outcome::Cancelled);
    };
    let run_id = submitted.run_id.clone();
    let set: ResultSet = serde_json::from_str(&status.results_json)
        .context("the runner's result set is not valid JSON")?;
    let state = RunState::try_from(status.state).unwrap_or(RunState::Failed);
    print_outcome(
        json,
        &Finished {
            run_id: &run_id,
            state,
            run_dir: &status.run_dir,
            total: status.total,
            finished: status.finished,
            errors: status.errors,
            error: &status.error,
        },
        &set,
    )
}

/// How a run ended, for the closing report.
pub(super) struct Finished<'a> {
    pub run_id: &'a str,
    pub state: RunState,
    pub run_dir: &'a str,
    pub total: u32,
    pub finished: u32,
    pub errors: u32,
    pub error: &'a str,
}

/// The closing report of a run (local or Slurm): the aggregate and generalization tables, or
/// the JSON document with `--json`; the outcome follows the run's state.
pub(super) fn print_outcome(
    json: bool,
    f: &Finished<'_>,
    set: &ResultSet,
) -> anyhow::Result<Outcome> {
    let report = Report::build(&set.tasks)?;
    if json {
        print_json(&serde_json::json!({
            "run_id": f.run_id,
            "state": f.state.as_str_name().to_lowercase(),
            "run_dir": f.run_dir,
            "total": f.total,
            "finished": f.finished,
            "errors": f.errors,
            "error": (!f.error.is_empty()).then_some(f.error),
            "report": report,
        }))?;
    } else {
        print!("{}", report.markdown());
        println!("\nresults: {}/results.json", f.run_dir);
        if !f.error.is_empty() {
            eprintln!("{}", f.error);
        }
    }
    Ok(match f.state {
        RunState::Done => Outcome::Ok,
        RunState::Cancelled => Outcome::Cancelled,
        _ => Outcome::Invalid,
    })
}

async fn cancel(client: &mut Client, run_id: &str) -> anyhow::Result<()> {
    client
        .cancel_run(CancelRunRequest {
            run_id: run_id.to_string(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("cancelling {run_id}: {}", s.message()))?;
    Ok(())
}
