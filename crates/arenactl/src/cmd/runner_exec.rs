//! `arenactl runner exec`: the runner's one-shot mode, one task run on the local containerd
//! (a Slurm job's), its events printed one line each, stopped cleanly by SIGTERM.

use std::sync::Arc;

use arena_run::events::Events;
use arena_runner::{ExecRequest, RunnerError};

use super::engine::local_engine;
use super::run_view::describe;
use super::{runtime, Outcome};
use crate::cli::RunnerArgs;

/// Runs `req` on an engine of `runner`'s GPUs (the first), to its end or a signal.
pub(super) fn exec(runner: &RunnerArgs, req: ExecRequest) -> anyhow::Result<Outcome> {
    runtime()?.block_on(async move {
        let engine = local_engine(runner, &[]).await?;
        let gpu = engine.pool.gpus().first().cloned();
        if let Some(g) = &gpu {
            eprintln!(
                "arena runner exec {}#{} on GPU {} ({}{})",
                req.item.task_id,
                req.item.repeat,
                g.index,
                g.kind,
                if g.devices.is_empty() {
                    String::new()
                } else {
                    format!(": {}", g.devices.join(", "))
                }
            );
        }
        // The job's log: one line per event.
        let events = Arc::new(Events::default());
        let (_, mut live) = events.subscribe();
        let printer = tokio::spawn(async move {
            while let Ok(ev) = live.recv().await {
                if let Some(line) = describe(&ev) {
                    eprintln!("[{}#{}] {line}", ev.task_id, ev.repeat);
                }
            }
        });
        // scancel and the time limit send SIGTERM: the running container is killed and
        // removed before the job goes.
        let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            eprintln!("signalled: stopping the task run's containers");
            let _ = cancel_tx.send(true);
        });
        let outcome = engine.exec_item(&req, events.clone(), cancel_rx).await;
        drop(events);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), printer).await;
        match outcome {
            Ok(_) => Ok(Outcome::Ok),
            Err(RunnerError::Cancelled) => Ok(Outcome::Cancelled),
            Err(e) => Err(e.into()),
        }
    })
}
