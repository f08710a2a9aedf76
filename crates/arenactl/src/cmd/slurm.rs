//! `arenactl run --backend slurm` (the head: checks and records the run, submits one job per
//! task run, follows them to the end) and `arenactl cancel RUN_DIR` (scancels a run's jobs).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use arena_proto::v1::RunState;
use arena_run::RunRequest;
use arena_slurm::{Head, HeadRequest, SlurmCommands};

use super::run_follow::{print_outcome, Finished};
use super::run_view::View;
use super::{absolute, default_out, print_json, runtime, Outcome};
use crate::cli::RunArgs;

pub fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        args.remote.runner.is_none(),
        "--runner and --backend slurm exclude each other: Slurm jobs run the runner on their nodes"
    );
    anyhow::ensure!(
        args.secrets.is_empty(),
        "--secret and --backend slurm exclude each other: a job would find its secret on disk"
    );
    let out = absolute(&args.out.clone().unwrap_or_else(|| default_out(&args)));
    // Jobs read the agents directory, lockfile and hidden set of this machine's filesystem.
    super::preflight::run(&args, &None, &out)?;
    let agent = if Path::new(&args.agent).is_file() {
        absolute(Path::new(&args.agent)).display().to_string()
    } else {
        args.agent.clone()
    };
    let req = HeadRequest {
        run: RunRequest {
            image_lock: absolute(&args.image_lock),
            tasks: args.tasks.clone(),
            agent,
            runs: args.runs,
            run_dir: out.clone(),
            hidden_set: args.unseen.as_deref().map(absolute),
            memory: args.memory,
            perf_pairs: args.perf_pairs,
            trusted_pairs: args.trusted_pairs,
            checked_calls: args.checked_calls,
            secrets: Default::default(),
            probe: false,
        },
        agents_dir: absolute(&args.local.agents_dir),
        exe: std::env::current_exe().context("finding arenactl's own path for the jobs")?,
        containerd_socket: absolute(&args.local.containerd.socket),
        namespace: args.local.containerd.namespace.clone(),
        store: absolute(args.local.store.store()?.root()),
        partition: args.partition.clone(),
        sbatch_args: args.sbatch_args.clone(),
        retries: args.retries,
        bundle: args.bundle.as_deref().map(absolute),
    };
    let Head { plan, backend } = arena_slurm::prepare(&req)?;
    let items = plan.items();
    let run_id = plan.record.run_id.clone();
    let json = args.out_format.json;
    let mut view = View::new(json, items.len() as u64);
    view.note(&format!(
        "run {run_id}: {} task runs as Slurm jobs{}, directory {}",
        items.len(),
        args.partition
            .as_deref()
            .map(|p| format!(" on partition {p}"))
            .unwrap_or_default(),
        out.display()
    ));
    let summary = runtime()?.block_on(async move {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let flag = Arc::new(AtomicBool::new(false));
        let f2 = flag.clone();
        let follow = tokio::task::spawn_blocking(move || {
            backend.run(
                &mut |e| {
                    let _ = tx.send(e);
                },
                &f2,
            )
        });
        let mut cancelling = false;
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(e) => view.event(&e),
                    None => break,
                },
                _ = tokio::signal::ctrl_c(), if !cancelling => {
                    cancelling = true;
                    view.note("cancelling: scancel of the run's jobs (state is kept; run the same command to resume)");
                    flag.store(true, Ordering::SeqCst);
                }
            }
        }
        view.finish();
        follow.await?.map_err(anyhow::Error::from)
    })?;
    let set = plan.rundir.write_results(&run_id, &items)?;
    let errors = summary.failed.len() as u32;
    let state = if summary.cancelled {
        RunState::Cancelled
    } else if errors > 0 {
        RunState::Failed
    } else {
        RunState::Done
    };
    let error = if errors > 0 {
        // Each task run given up on, with its last job's reason (Slurm's state and the end
        // of its log), so a script or a CI log shows why without opening the ledger.
        let why: Vec<String> = summary
            .failed
            .iter()
            .map(|(item, reason)| format!("{}: {reason}", item.label()))
            .collect();
        format!(
            "{errors} task runs could not be carried out ({}); run again to retry them",
            why.join("; ")
        )
    } else {
        String::new()
    };
    print_outcome(
        json,
        &Finished {
            run_id: &run_id,
            state,
            run_dir: &plan.rundir.root.display().to_string(),
            total: items.len() as u32,
            finished: set.tasks.len() as u32,
            errors,
            error: &error,
        },
        &set,
    )
}

/// `arenactl cancel RUN_DIR`: scancels every live job of the run.
pub fn cancel(run_dir: &Path, json: bool) -> anyhow::Result<Outcome> {
    let (run_id, live) = arena_slurm::cancel_run(run_dir, &SlurmCommands)?;
    if json {
        let jobs: Vec<_> = live
            .iter()
            .map(|(item, j)| serde_json::json!({"job_id": j.id, "task_id": item.task_id, "repeat": item.repeat, "state": j.state.as_str()}))
            .collect();
        print_json(&serde_json::json!({"run_id": run_id, "cancelled": jobs}))?;
    } else if live.is_empty() {
        println!("run {run_id}: no live Slurm jobs");
    } else {
        for (item, j) in &live {
            println!("cancelled job {} ({})", j.id, item.label());
        }
    }
    Ok(Outcome::Ok)
}
