//! What an Evaluate request answers: the task result record a run writes for a task run
//! (`arena.task_result/v2`), with the warm evaluator's baseline as its baseline, the paired
//! evaluation of the candidate as its candidate, trust `trusted`, and every digest the result
//! depends on — the candidate's files in place of an agent.

use arena_run::result::{GpuRecord, Provenance, TaskResult, Timings, Trust};

use super::candidate::Candidate;
use super::catalog::ServedTask;
use super::pool::Served;
use super::EvalError;

pub fn task_result(
    task: &ServedTask,
    evaluation_id: &str,
    candidate: &Candidate,
    served: &Served,
    total_s: f64,
    request_id: &str,
) -> Result<TaskResult, EvalError> {
    let t = &task.task;
    let mut r = TaskResult::new(
        t.id.clone(),
        t.config.task_type.as_str(),
        0,
        served.baseline.evaluation.clone(),
        served.evaluated.evaluation.clone(),
    );
    r.trust = Trust::Trusted;
    let harness = arena_task::harness_digest(&t.dir, &t.agent_files)
        .map_err(|e| EvalError::Internal(e.to_string()))?;
    r.provenance = Some(Provenance {
        candidate: Some(candidate.digest.clone()),
        evaluator: Some(arena_eval::trusted::digest()),
        ..Provenance::new(
            evaluation_id.to_string(),
            task.task_digest.clone(),
            harness,
            task.image.manifest.clone(),
            task.lock_digest.clone(),
        )
    });
    r.evaluators
        .insert("baseline".into(), served.baseline.record.clone());
    r.evaluators
        .insert("candidate".into(), served.evaluated.record.clone());
    r.gpu = Some(GpuRecord {
        index: served.gpu.index,
        kind: served.gpu.kind.clone(),
    });
    r.timings = Some(Timings {
        total_s,
        candidate_s: Some(served.evaluate.as_secs_f64()),
        ..Default::default()
    });
    r.extra.insert(
        "evaluate".into(),
        serde_json::json!({
            "request_id": request_id,
            "evaluator": served.evaluator,
            "warm": served.warm,
            "queue_s": served.queue.as_secs_f64(),
            "evaluate_s": served.evaluate.as_secs_f64(),
            "retired": served.evaluated.retire,
        }),
    );
    Ok(r)
}
