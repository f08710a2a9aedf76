//! `arenactl run --backend slurm` (the head: checks and records the run, submits one job per
//! task run, follows them to the end) and `arenactl cancel RUN_DIR` (scancels a run's jobs).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use arena_eval::GateTimeouts;
use arena_proto::v1::RunState;
use arena_runner::rundir::{write_json, RunDir};
use arena_runner::RunRequest;
use arena_slurm::backend::{cancel_marker, live_jobs};
use arena_slurm::{Backend, JobSpec, SlurmCli, SlurmCommands};

use super::run::{absolute, default_out, print_outcome, Finished, View};
use super::{print_json, runtime, Outcome};
use crate::cli::RunArgs;

/// How often the head asks squeue and looks for result files.
const POLL: Duration = Duration::from_millis(250);

pub fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        args.runner.is_none(),
        "--runner and --backend slurm exclude each other: Slurm jobs run the runner on their nodes"
    );
    let out = absolute(&args.out.clone().unwrap_or_else(|| default_out(&args)));
    let agents_dir = absolute(&args.local.agents_dir);
    let agent = if Path::new(&args.agent).is_file() {
        absolute(Path::new(&args.agent)).display().to_string()
    } else {
        args.agent.clone()
    };
    let req = RunRequest {
        image_lock: absolute(&args.image_lock),
        tasks: args.tasks.clone(),
        agent,
        runs: args.runs,
        run_dir: out.clone(),
        hidden_set: args.unseen.as_deref().map(absolute),
    };
    // Everything that can be checked without a node's containerd is checked here, before any
    // job exists; each job checks the images on its own node.
    let plan = arena_runner::plan(&req, std::slice::from_ref(&agents_dir))?;
    write_json(&plan.rundir.record_path(), &plan.record)?;
    let store = absolute(args.local.store.store()?.root());
    let exe = std::env::current_exe().context("finding arenactl's own path for the jobs")?;
    let mut command: Vec<String> = vec![
        exe.display().to_string(),
        "runner".into(),
        "exec".into(),
        "--run-dir".into(),
        plan.rundir.root.display().to_string(),
        "--agent".into(),
        plan.agent.file.display().to_string(),
        "--gpus".into(),
        "slurm".into(),
        "--containerd".into(),
        absolute(&args.local.containerd.socket)
            .display()
            .to_string(),
        "--namespace".into(),
        args.local.containerd.namespace.clone(),
        "--store".into(),
        store.display().to_string(),
        "--agents-dir".into(),
        agents_dir.display().to_string(),
    ];
    if let Some(h) = &req.hidden_set {
        command.extend(["--unseen".into(), h.display().to_string()]);
    }
    if let Some(b) = &args.bundle {
        let b = absolute(b);
        anyhow::ensure!(b.is_file(), "--bundle {}: no such file", b.display());
        command.extend(["--bundle".into(), b.display().to_string()]);
    }
    let evaluation_s = plan
        .tasks
        .values()
        .map(|t| GateTimeouts::for_task(&t.config).total())
        .max()
        .unwrap_or(0);
    let items = plan.items();
    let run_id = plan.record.run_id.clone();
    let backend = Backend {
        slurm: SlurmCommands,
        spec: JobSpec {
            command,
            partition: args.partition.clone(),
            sbatch_args: args.sbatch_args.clone(),
            time_limit_min: JobSpec::time_limit(
                plan.agent.timeout_s,
                evaluation_s,
                plan.hidden.is_some(),
            ),
            log_dir: plan.rundir.root.join("slurm"),
        },
        rundir: plan.rundir.clone(),
        run_id: run_id.clone(),
        items: items.clone(),
        retries: args.retries,
        poll: POLL,
    };
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
        format!("{errors} task runs could not be carried out; run again to retry them")
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
    let rundir = RunDir::new(run_dir)?;
    let record = rundir.load_record()?.with_context(|| {
        format!(
            "{}: missing: not a run directory",
            rundir.record_path().display()
        )
    })?;
    // The head (if one follows the run) stops at this mark instead of retrying the jobs.
    let marker = cancel_marker(&rundir.root);
    if let Some(parent) = marker.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&marker, b"")?;
    let slurm = SlurmCommands;
    let live = live_jobs(&slurm.jobs()?, &record.run_id);
    let ids: Vec<String> = live.values().map(|j| j.id.clone()).collect();
    slurm.cancel(&ids)?;
    if json {
        let jobs: Vec<_> = live
            .iter()
            .map(|(item, j)| serde_json::json!({"job_id": j.id, "task_id": item.task_id, "repeat": item.repeat, "state": j.state.as_str()}))
            .collect();
        print_json(&serde_json::json!({"run_id": record.run_id, "cancelled": jobs}))?;
    } else if ids.is_empty() {
        println!("run {}: no live Slurm jobs", record.run_id);
    } else {
        for (item, j) in &live {
            println!("cancelled job {} ({})", j.id, item.label());
        }
    }
    Ok(Outcome::Ok)
}
