//! Following a submitted run (`arenactl run`, `runner watch`, `unseen eval`, a probe's rounds):
//! its events as progress bars until it ends, Ctrl-C cancelling it or detaching a watcher, then
//! the closing report from its results.

use std::path::{Path, PathBuf};

use anyhow::Context;
use arena_proto::v1::{
    CancelRunRequest, EventKind, GetRunRequest, RunState, RunStatus, SubmitRunResponse,
    WatchRunRequest,
};
use arena_report::{Report, ResultSet};
use tokio_stream::StreamExt;

use super::endpoint::Client;
use super::run_view::View;
use super::{print_json, Outcome};

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
pub(super) async fn follow(
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
    let report = Report::build(&set.tasks)?.with_unscored(set.infra_errors.clone());
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
