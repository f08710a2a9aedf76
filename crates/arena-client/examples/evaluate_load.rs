//! Load on a runner's Evaluate API: N requests of one candidate, C at a time (C = N: all at
//! once), each answered once — a result, or busy (the runner's queue is full) — and the
//! latencies of the results. The numbers of ci/bench/evaluate-api.sh.
//!
//! usage: evaluate_load RUNNER LOCKFILE TASK PATH=FILE REQUESTS CONCURRENCY
//! prints one JSON object: answered, busy, other errors, duplicate ids, latency p50/p99 (ms),
//! the evaluator's gate time per result (ms), evaluations per second over the wall time, and
//! each answer's speedup (in the order answered).

use std::sync::Arc;
use std::time::Instant;

use arena_client::{ClientError, Evaluate, Runner};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 7 {
        eprintln!(
            "usage: {} RUNNER LOCKFILE TASK PATH=FILE REQUESTS CONCURRENCY",
            a[0]
        );
        std::process::exit(2);
    }
    let (rel, file) = a[4].split_once('=').ok_or("PATH=FILE")?;
    let content = std::fs::read(file)?;
    let (n, c): (usize, usize) = (a[5].parse()?, a[6].parse()?);
    let runner = Runner::connect(&a[1]).await?;
    let gate = Arc::new(tokio::sync::Semaphore::new(c.max(1)));
    let t0 = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..n {
        let (runner, gate) = (runner.clone(), gate.clone());
        let req = Evaluate::new(&a[2], &a[3])
            .file(rel, content.clone())
            .request_id(format!("load-{i}"));
        calls.spawn(async move {
            let _p = gate.acquire_owned().await;
            let t = Instant::now();
            let r = runner.evaluate(req).await;
            (i, t.elapsed().as_secs_f64() * 1000.0, r)
        });
    }
    let (mut lat, mut gates, mut ids, mut speedups, mut compiled) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut busy, mut other, mut wrong_id) = (0, Vec::new(), 0);
    while let Some(j) = calls.join_next().await {
        let (i, ms, r) = j?;
        match r {
            Ok(e) => {
                if e.request_id != format!("load-{i}") {
                    wrong_id += 1;
                }
                ids.push(e.evaluation_id.clone());
                speedups.push(e.score.speedup);
                compiled.push(e.score.compiled_speedup);
                lat.push(ms);
                let g: f64 = e
                    .result
                    .evaluators
                    .get("candidate")
                    .and_then(|r| r.gate_s.as_ref())
                    .map(|m| m.values().sum())
                    .unwrap_or(f64::NAN);
                gates.push(g * 1000.0);
            }
            Err(ClientError::Busy(_)) => busy += 1,
            Err(e) => other.push(e.to_string()),
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let answered = lat.len();
    ids.sort();
    ids.dedup();
    let over: Vec<f64> = {
        let mut v: Vec<f64> = lat.iter().zip(&gates).map(|(l, g)| l - g).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    lat.sort_by(f64::total_cmp);
    gates.sort_by(f64::total_cmp);
    other.truncate(5);
    println!(
        "{}",
        serde_json::json!({
            "requests": n,
            "concurrency": c,
            "answered": answered,
            "busy": busy,
            "errors": other,
            "duplicate_evaluations": answered - ids.len(),
            "wrong_request_ids": wrong_id,
            "latency_ms": {"p50": percentile(&lat, 50.0), "p99": percentile(&lat, 99.0)},
            "gates_ms": {"p50": percentile(&gates, 50.0)},
            "latency_over_gates_ms": {"p50": percentile(&over, 50.0), "p99": percentile(&over, 99.0)},
            "wall_s": wall,
            "evaluations_per_s": answered as f64 / wall,
            "speedups": speedups,
            // Over the original compiled by torch.compile, where the task has that baseline.
            "compiled_speedups": compiled,
        })
    );
    Ok(())
}
