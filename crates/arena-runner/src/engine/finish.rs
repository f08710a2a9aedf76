//! The end of a run: what a killed runner had in flight is cleaned once more, `results.json`
//! is written (results, and the task runs that hit infrastructure errors), and the run's
//! state and last event say how it ended.

use arena_proto::v1::{EventKind, RunState};

use super::RunHandle;
use crate::task_run::Pipeline;
use crate::task_run::RunContext;

pub(super) async fn finish(ctx: &RunContext, h: &RunHandle, cancelled: bool, work: Pipeline) {
    // Every container of this start is torn down by now. A request a killed runner had in
    // flight can still be carried out by containerd after the restart's first clean-up (a
    // snapshot prepared for a dead client), so the run's prefix is cleaned once more. Not
    // after an unseen evaluation: task runs of the run may still be running elsewhere on
    // this containerd (Slurm jobs), and its own containers were each removed.
    if work != Pipeline::UnseenOnly {
        let prefix = format!("{}-", h.record.run_id);
        if let Err(e) = arena_runtime::cleanup::gc_prefix(ctx.rt.as_ref(), &prefix).await {
            tracing::warn!(run = %h.record.run_id, "clean-up of earlier attempts: {e}");
        }
    }
    if let Err(e) = arena_runtime::cleanup::gc_orphaned_imports(ctx.rt.as_ref()).await {
        tracing::warn!("clean-up of orphaned import leases: {e}");
    }
    let written = h.rundir.write_results(&h.record.run_id, &h.items);
    let (state, kind, msg) = match (&written, cancelled, h.errors()) {
        (Err(e), _, _) => (
            RunState::Failed,
            EventKind::RunDone,
            format!("results.json: {e}"),
        ),
        (Ok(_), true, _) => (
            RunState::Cancelled,
            EventKind::RunCancelled,
            "cancelled; run the same request again to resume".into(),
        ),
        (Ok(_), false, 0) => (RunState::Done, EventKind::RunDone, String::new()),
        (Ok(_), false, n) => (
            RunState::Failed,
            EventKind::RunDone,
            format!("{n} task runs could not be carried out; run again to retry them"),
        ),
    };
    *h.state.lock().unwrap() = (state, (!msg.is_empty()).then(|| msg.clone()));
    ctx.events.message(kind, None, msg);
}
