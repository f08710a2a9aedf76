//! `arenactl eval --image-lock L --task T --candidate PATH=FILE`: one candidate through a
//! runner's Evaluate API (arena-client's one call), its gates, speedup and score printed (or
//! the whole answer with `--json`). Without `--runner` a runner starts in-process and its warm
//! evaluator is stopped when the command ends; a runner that serves (`arenactl runner serve`)
//! keeps it for the next request.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use arena_client::{Evaluate, Runner};
use arena_eval::record::GateStatus;

use super::engine::local_engine;
use super::run::runner_path;
use super::{endpoint, print_json, runtime, Outcome};
use crate::cli::EvalArgs;

/// The candidate's files: `PATH=FILE` pairs, or one `FILE` for the task's only agent file
/// (sent under the empty path, which the runner maps to it).
fn files(specs: &[String]) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for s in specs {
        let (rel, file) = match s.split_once('=') {
            Some((r, f)) => (r.to_string(), f),
            None if specs.len() == 1 => (String::new(), s.as_str()),
            None => bail!("--candidate {s}: with several candidates, each is PATH=FILE"),
        };
        let bytes =
            std::fs::read(file).with_context(|| format!("--candidate {s}: reading {file}"))?;
        if out.insert(rel.clone(), bytes).is_some() {
            bail!("--candidate: `{rel}` is given twice");
        }
    }
    Ok(out)
}

pub fn run(args: EvalArgs) -> anyhow::Result<Outcome> {
    let (runner, token) = super::run::resolve(&args.remote.runner, &args.remote.token_file)?;
    if super::preflight::paths_are_local(&runner) {
        let lock = super::preflight::lockfile("--image-lock", &args.image_lock)?;
        let known = lock.images.iter().any(|r| {
            r.task.as_deref() == Some(args.task.as_str())
                || (r.task.is_some() && r.task_digest.as_deref() == Some(args.task.as_str()))
        });
        anyhow::ensure!(
            known,
            "--task {}: not a task of {} (its id, or its locked task digest)",
            args.task,
            args.image_lock.display()
        );
    }
    let files = files(&args.candidates)?;
    runtime()?.block_on(async move {
        let mut req = Evaluate::new(runner_path(&runner, &args.image_lock)?, args.task.clone())
            .request_id(args.request_id.clone());
        req.files = files;
        if let Some(n) = args.trusted_pairs {
            req = req.trusted_pairs(n);
        }
        if let Some(n) = args.checked_calls {
            req = req.checked_calls(n);
        }
        if let Some(t) = args.timeout {
            req = req.timeout(Duration::from_secs_f64(t.max(0.001)));
        }
        let answer = match &runner {
            Some(addr) => {
                Runner::connect_with(addr, token.as_deref())
                    .await
                    .map_err(|e| super::reach::runner_error(addr, e))?
                    .evaluate(req)
                    .await
            }
            None => {
                let engine = local_engine(&args.local, &[]).await?;
                let (client, server, dir) = endpoint::in_process(engine.clone()).await?;
                let sock = dir.path().join("runner.sock");
                let r = Runner::connect_with(&format!("unix:{}", sock.display()), None).await;
                drop(client);
                let answer = match r {
                    Ok(runner) => runner.evaluate(req).await,
                    Err(e) => Err(e),
                };
                engine.shutdown().await;
                server.abort();
                answer
            }
        };
        let e = answer?;
        if args.out.json {
            let result: serde_json::Value = serde_json::from_str(&e.result_json)?;
            print_json(&serde_json::json!({
                "request_id": e.request_id,
                "evaluation_id": e.evaluation_id,
                "warm": e.warm,
                "queue_ms": e.queue_ms,
                "evaluate_ms": e.evaluate_ms,
                "score": e.score.score,
                "compiled": e.score.compiled,
                "correct": e.score.correct,
                "speedup": e.score.speedup,
                // Why a correct candidate is credited no speedup (the gate it failed), as the
                // text view says it.
                "performance_failure": e.score.performance_failure.as_ref().map(|f| f.to_string()),
                "trust": e.result.trust.label(),
                "result": result,
            }))?;
        } else {
            show(&e, &args.task, &args.image_lock);
        }
        Ok(Outcome::Ok)
    })
}

fn show(e: &arena_client::Evaluation, task: &str, lock: &Path) {
    let r = &e.result;
    let gate = |g: &arena_eval::record::GateReport| {
        let status = match g.status {
            GateStatus::Ok => "ok",
            GateStatus::Fail => "FAILED",
            GateStatus::Skipped => "skipped",
        };
        match &g.error {
            Some(why) => format!("{status}: {why}"),
            None => status.to_string(),
        }
    };
    println!(
        "{task} ({})  evaluation {}",
        lock.display(),
        e.evaluation_id
    );
    println!("  compile      {}", gate(&r.candidate.compile));
    println!("  correctness  {}", gate(&r.candidate.correctness));
    for c in &r.candidate.performance {
        let base = c.pairing.baseline_ms;
        let error = c.error.as_deref();
        match (base, error) {
            (_, Some(why)) => println!("  {:12} failed: {why}", c.test_case_id),
            (Some(b), None) => println!(
                "  {:12} {:.4} ms (original {:.4} ms, {:.3}x)",
                c.test_case_id,
                c.execution_time_ms,
                b,
                b / c.execution_time_ms
            ),
            (None, None) => println!("  {:12} {:.4} ms", c.test_case_id, c.execution_time_ms),
        }
    }
    if let Some(why) = &e.score.performance_failure {
        println!("  performance  failed: {why}");
    }
    println!(
        "  score {:.1}  speedup {:.3}  trust {}  ({} evaluator; queued {:.0} ms, evaluated in {:.0} ms)",
        e.score.score,
        e.score.speedup,
        r.trust.label(),
        if e.warm { "a warm" } else { "a new" },
        e.queue_ms,
        e.evaluate_ms
    );
}
