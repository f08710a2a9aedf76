//! Synthetic runs for tests and benchmarks of the reports: task results of known speedups with
//! the trusted evaluator's paired samples, gates that fail where asked, unseen evaluations,
//! digests and log paths — deterministic, from a seed.

use std::collections::BTreeMap;

use arena_digest::Digest;
use arena_eval::record::{Evaluation, GateReport, GateStatus, PerfCase};
use arena_run::result::{ContainerRecord, Provenance, ResultSet, Trust, UnseenResult};
use arena_task::TaskId;

use crate::TaskResult;

/// One task run to make.
#[derive(Debug, Clone)]
pub struct Spec {
    pub task_id: String,
    pub task_type: String,
    pub repeat: u32,
    /// `None`: the candidate fails correctness.
    pub speedup: Option<f64>,
    /// Relative noise of each paired sample (0.02 = ±2%).
    pub noise: f64,
    pub unseen: bool,
}

fn gate(ok: bool, error: &str) -> GateReport {
    if ok {
        GateReport::new(GateStatus::Ok, None)
    } else {
        GateReport::new(GateStatus::Fail, Some(error.to_string()))
    }
}

fn cases(
    rng: &mut fastrand::Rng,
    prefix: &str,
    base_ms: f64,
    speedup: f64,
    noise: f64,
) -> Vec<PerfCase> {
    (1..=3)
        .map(|i| {
            let b = base_ms * i as f64;
            let jitter = |rng: &mut fastrand::Rng| 1.0 + noise * (2.0 * rng.f64() - 1.0);
            let pairs: Vec<[f64; 2]> = (0..10)
                .map(|_| [b * jitter(rng), b / speedup * jitter(rng)])
                .collect();
            let med = |k: usize| {
                let mut v: Vec<f64> = pairs.iter().map(|p| p[k]).collect();
                v.sort_by(f64::total_cmp);
                (v[4] + v[5]) / 2.0
            };
            let mut c = PerfCase::new(&format!("{prefix}{i}"), med(1));
            c.pairing.baseline_ms = Some(med(0));
            c.pairing.pairs_ms = Some(pairs);
            if prefix == "perf" {
                c.extra
                    .insert("params".into(), serde_json::json!({"shape": [64 * i, 128]}));
            }
            c
        })
        .collect()
}

fn digest(what: &str, id: &str) -> Digest {
    Digest::of_bytes(format!("{what}:{id}").as_bytes())
}

/// The task result `spec` describes; `seed` makes its samples.
pub fn result(spec: &Spec, seed: u64) -> TaskResult {
    let mut rng = fastrand::Rng::with_seed(seed);
    let s = spec.speedup.unwrap_or(1.0);
    let baseline_cases = cases(&mut rng, "perf", 0.5, 1.0, spec.noise);
    let candidate = Evaluation::new(
        gate(true, ""),
        gate(
            spec.speedup.is_some(),
            "perf2: max abs error 3.5 (tolerance 0.01)",
        ),
        if spec.speedup.is_some() {
            cases(&mut rng, "perf", 0.5, s, spec.noise)
        } else {
            vec![]
        },
    );
    let baseline = Evaluation::new(gate(true, ""), gate(true, ""), baseline_cases);
    let id = TaskId::new(&spec.task_id).expect("a valid task id");
    let mut r = TaskResult::new(id, &spec.task_type, spec.repeat, baseline, candidate);
    r.trust = Trust::Trusted;
    r.provenance = Some(Provenance {
        arena_version: "0.1.0".into(),
        run_id: "rfixture".into(),
        task: digest("task", &spec.task_id),
        harness: digest("harness", &spec.task_id),
        image: digest("image", &spec.task_id),
        agent_image: Some(digest("image", &spec.task_id)),
        agent: Some(digest("agent", "fixture")),
        candidate: None,
        lockfile: digest("lockfile", "fixture"),
        evaluator: Some(digest("evaluator", "fixture")),
        unseen_set: spec.unseen.then(|| digest("unseen", "fixture")),
    });
    let dir = format!("tasks/{}/r{}", spec.task_id.replace('/', "__"), spec.repeat);
    for phase in ["baseline", "agent", "candidate"] {
        r.containers.insert(
            phase.into(),
            ContainerRecord {
                id: format!("rfixture-{phase}"),
                exit_code: 0,
                timed_out: false,
                create_s: 0.05,
                start_s: 0.01,
                run_s: 1.0,
                teardown_s: 0.02,
                stdout: Some(format!("{dir}/logs/{phase}.stdout.log")),
                stderr: Some(format!("{dir}/logs/{phase}.stderr.log")),
                stdout_truncated: false,
                stderr_truncated: false,
            },
        );
    }
    if spec.unseen {
        let ok = spec.speedup.is_some() && rng.f64() > 0.2;
        let orig = Evaluation::new(
            gate(true, ""),
            gate(true, ""),
            cases(&mut rng, "u", 0.8, 1.0, spec.noise),
        );
        let opt = Evaluation::new(
            gate(true, ""),
            gate(ok, "u3: output differs"),
            if ok {
                cases(&mut rng, "u", 0.8, s * 0.8, spec.noise)
            } else {
                vec![]
            },
        );
        r.unseen = Some(UnseenResult {
            set_digest: digest("unseen", "fixture").to_string(),
            original: orig,
            optimized: opt,
            failures_by_category: if ok {
                BTreeMap::new()
            } else {
                [("alignment_stress".to_string(), 1)].into()
            },
            original_failures_by_category: BTreeMap::new(),
            original_passed: vec![true; 4],
            optimized_passed: vec![true, true, true, ok],
        });
    }
    r
}

/// A run of `tasks` tasks × `repeats`, of three task types, speedups spread over 0.5–3× with
/// every seventh task failing; `factor` multiplies every speedup (a second agent's run).
pub fn run(tasks: usize, repeats: u32, factor: f64, seed: u64) -> ResultSet {
    let types = ["triton2triton", "torch2hip", "python2python"];
    let mut out = Vec::new();
    for t in 0..tasks {
        for rep in 0..repeats {
            let base = 0.5 + 2.5 * ((t * 37) % 100) as f64 / 100.0;
            let spec = Spec {
                task_id: format!("{}/fixture/task_{t:04}", types[t % 3]),
                task_type: types[t % 3].into(),
                repeat: rep,
                speedup: (t % 7 != 6).then_some(base * factor),
                noise: 0.03,
                unseen: t % 2 == 0,
            };
            out.push(result(&spec, seed ^ ((t as u64) << 8) ^ rep as u64));
        }
    }
    ResultSet {
        schema: arena_run::result::RESULT_SET_SCHEMA.into(),
        run_id: Some(format!("rfixture{seed:x}")),
        tasks: out,
        infra_errors: vec![],
        extra: BTreeMap::new(),
    }
}
