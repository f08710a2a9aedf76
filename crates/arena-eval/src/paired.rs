//! Paired, interleaved performance for a self-reported harness: in one evaluator container,
//! the original kernel and the agent's each run the task's performance command in rounds,
//! in an order drawn from a seed and balanced (each two rounds hold one original-first and
//! one candidate-first pair: ABBA…), so that neither kernel is systematically the one timed
//! second (measured on an H100 as a ~1 % bias) and both share the same device state. Each
//! round's cases are read as AgentKernelArena reads them; a case's times become pairs, its
//! speedup the median ratio over the rounds, with the distribution-free interval of the
//! rounds' speedups (arena-report's `median_interval`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::aka_perf::{read_run, Side, Writer};
use crate::evaluator_record::EvaluatorRecord;
use crate::record::{Evaluation, PerfCase};
use crate::trusted::{Role, BASELINE, CANDIDATE};

/// Rounds of performance runs by default (twelve runs in all): the fewest whose range holds
/// the median rounds' speedup at 95% (six: 96.9%; five: 93.75%; arena-report's
/// `median_interval`).
pub const DEFAULT_PAIRS: u32 = 6;

/// The order of the rounds: `order[r]` is the kernel run first in round `r`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairedPlan {
    pub pairs: u32,
    pub seed: u64,
    /// Each round's two runs, in the order they run.
    pub rounds: Vec<[String; 2]>,
}

impl PairedPlan {
    /// `pairs` rounds from `seed`: in every two consecutive rounds one starts with each
    /// kernel, which one first drawn from the seed (an odd last round is drawn alone).
    pub fn new(pairs: u32, seed: u64) -> PairedPlan {
        let mut rng = fastrand::Rng::with_seed(seed);
        let ab = [BASELINE.name.to_string(), CANDIDATE.name.to_string()];
        let ba = [CANDIDATE.name.to_string(), BASELINE.name.to_string()];
        let mut rounds = Vec::with_capacity(pairs as usize);
        while rounds.len() < pairs as usize {
            let first_ab = rng.bool();
            rounds.push(if first_ab { ab.clone() } else { ba.clone() });
            if rounds.len() < pairs as usize {
                rounds.push(if first_ab { ba.clone() } else { ab.clone() });
            }
        }
        PairedPlan {
            pairs,
            seed,
            rounds,
        }
    }

    /// Every run, in order: (round, role).
    pub fn runs(&self) -> impl Iterator<Item = (usize, &str)> {
        self.rounds
            .iter()
            .enumerate()
            .flat_map(|(r, pair)| pair.iter().map(move |role| (r, role.as_str())))
    }
}

/// The step (and the directory of its copies under the out directory) of one run.
pub fn run_name(round: usize, role: &str) -> String {
    format!("perf{round}-{role}")
}

/// The step that compiles the original in its own tree before the rounds.
pub const BASELINE_COMPILE: &str = "baseline-compile";

/// The median of `xs` (the mean of the middle two for an even count), reordering `xs`: one
/// definition for arena's pair ratios here and its report's statistics (arena-report).
/// `xs` must not be empty.
pub fn median(xs: &mut [f64]) -> f64 {
    let n = xs.len();
    let (lower, mid, _) = xs.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        *mid
    } else {
        // The largest of the lower half is its neighbour.
        let below = lower.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (below + *mid) / 2.0
    }
}

fn role(name: &str) -> Role {
    if name == BASELINE.name {
        BASELINE
    } else {
        CANDIDATE
    }
}

/// Whose kernel a run of `name` runs, in words.
fn whose(name: &str) -> &'static str {
    if role(name) == BASELINE {
        "the original kernel"
    } else {
        "the agent's kernel"
    }
}

/// Which kernel's report a run of `name` is, as the report reader takes it.
fn side_of(name: &str) -> Side {
    if role(name) == BASELINE {
        Side::Baseline
    } else {
        Side::Candidate
    }
}

/// The performance gate of a paired evaluation, from the exit codes (`codes`, by step) and the
/// runs' copies under `out`: the candidate's cases, each with its paired baseline median
/// (`baseline_ms`), every round's pair (`pairs_ms`) and the candidate's samples; or why the
/// gate failed. `note` explains a container that stopped early.
pub fn collect_performance(
    out: &Path,
    codes: &BTreeMap<String, i32>,
    plan: &PairedPlan,
    task_type: &str,
    note: Option<&str>,
) -> Result<(Vec<PerfCase>, String), String> {
    let reached = |step: &str| -> Result<(), String> {
        match codes.get(step) {
            Some(0) => Ok(()),
            Some(code) => match crate::collect::runner_code(*code) {
                Some(why) => Err(format!("{step}: {why}")),
                None => Err(format!("{step}: the command exited {code}")),
            },
            None => Err(format!(
                "{step}: not reached ({})",
                note.unwrap_or("the evaluator stopped before it")
            )),
        }
    };
    reached(BASELINE_COMPILE)
        .map_err(|e| format!("the original kernel in the paired session: {e}"))?;
    // case id → per round (baseline ms, candidate ms).
    let mut order: Vec<String> = Vec::new();
    let mut times: BTreeMap<String, BTreeMap<usize, [Option<f64>; 2]>> = BTreeMap::new();
    let mut first: BTreeMap<String, PerfCase> = BTreeMap::new();
    let mut source = String::new();
    for (r, name) in plan.runs() {
        let step = run_name(r, name);
        let who = whose(name);
        reached(&step).map_err(|e| format!("{who}, round {}: {e}", r + 1))?;
        let side = side_of(name);
        let run = read_run(
            &out.join("perf").join(&step),
            task_type,
            side,
            Writer::Harness,
        )
        .map_err(|e| format!("{who}, round {}: {e}", r + 1))?;
        if side == Side::Candidate && source.is_empty() {
            source = run.source.clone();
        }
        let slot = usize::from(side == Side::Candidate);
        let mut seen = std::collections::BTreeSet::new();
        for c in run.cases {
            if !seen.insert(c.test_case_id.clone()) {
                return Err(format!(
                    "{who}, round {}: case `{}` appears twice",
                    r + 1,
                    c.test_case_id
                ));
            }
            if !times.contains_key(&c.test_case_id) {
                order.push(c.test_case_id.clone());
            }
            times
                .entry(c.test_case_id.clone())
                .or_default()
                .entry(r)
                .or_default()[slot] = Some(c.execution_time_ms);
            if side == Side::Candidate {
                first.entry(c.test_case_id.clone()).or_insert(c);
            }
        }
    }
    let mut cases = Vec::new();
    for id in order {
        let rounds = &times[&id];
        let mut pairs = Vec::new();
        let mut case = first
            .remove(&id)
            .unwrap_or_else(|| PerfCase::new(&id, -1.0));
        let mut failed = None;
        for r in 0..plan.rounds.len() {
            match rounds.get(&r).copied().unwrap_or_default() {
                [Some(b), Some(c)]
                    if crate::record::is_measured(b) && crate::record::is_measured(c) =>
                {
                    pairs.push([b, c])
                }
                [Some(b), Some(c)] => {
                    failed
                        .get_or_insert(format!("round {}: original {b} ms, agent's {c} ms", r + 1));
                }
                [None, _] => {
                    failed.get_or_insert(format!(
                        "round {}: the original kernel's report lacks it",
                        r + 1
                    ));
                }
                [_, None] => {
                    failed.get_or_insert(format!("round {}: the agent's report lacks it", r + 1));
                }
            }
        }
        if let Some(why) = failed {
            case.execution_time_ms = -1.0;
            case.error = Some(why.to_string());
        } else {
            let mut b: Vec<f64> = pairs.iter().map(|p| p[0]).collect();
            let mut c: Vec<f64> = pairs.iter().map(|p| p[1]).collect();
            case.execution_time_ms = median(&mut c);
            case.pairing.baseline_ms = Some(median(&mut b));
            case.pairing.pairs_ms = Some(pairs);
            // Every case of a round comes from the same two processes: a process that runs
            // slow slows all its cases. Intervals resample rounds, not each case's pairs.
            case.pairing.paired_by = Some(crate::record::PairedBy::Round);
        }
        case.measured.method = Some(format!(
            "paired self-reported: the task's performance command, {} rounds of both kernels in balanced random order, one evaluator session",
            plan.rounds.len()
        ));
        cases.push(case);
    }
    if cases.is_empty() {
        return Err("no performance cases".into());
    }
    Ok((cases, source))
}

/// Each performance run in the gate runner's record, in run order: (round, 0 for the
/// original or 1 for the agent's kernel, wall seconds by arena's clock).
fn perf_runs(record: &EvaluatorRecord) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
    record.commands.iter().flatten().filter_map(|cmd| {
        let wall = cmd.wall_s?;
        let (round, role) = cmd.step.strip_prefix("perf")?.split_once('-')?;
        let slot = match role {
            r if r == BASELINE.name => 0,
            r if r == CANDIDATE.name => 1,
            _ => return None,
        };
        Some((round.parse::<usize>().ok()?, slot, wall))
    })
}

/// Wall seconds of each kernel's performance runs (by arena's clock), from the gate runner's
/// record: (original's, agent's), in run order.
pub fn run_walls(record: &EvaluatorRecord) -> (Vec<f64>, Vec<f64>) {
    let (mut b, mut c) = (Vec::new(), Vec::new());
    for (_, slot, wall) in perf_runs(record) {
        if slot == 0 {
            b.push(wall)
        } else {
            c.push(wall)
        }
    }
    (b, c)
}

/// Each round's wall seconds by arena's clock, [original's, agent's], from the gate runner's
/// record (a run that never ran is absent).
pub fn round_walls(record: &EvaluatorRecord) -> BTreeMap<usize, [Option<f64>; 2]> {
    let mut out: BTreeMap<usize, [Option<f64>; 2]> = BTreeMap::new();
    for (round, slot, wall) in perf_runs(record) {
        let w = &mut out.entry(round).or_default()[slot];
        *w = Some(w.unwrap_or(0.0) + wall);
    }
    out
}

/// The cross-check of each round on its own (its reported times against its two commands'
/// wall times), and the first that fails, named by round. The score is the median of the
/// rounds' ratios: a harness lying in some rounds only must be caught in those.
pub fn first_inconsistent_round(
    cases: &[PerfCase],
    rounds: &BTreeMap<usize, [Option<f64>; 2]>,
    calls_per_case: Option<u64>,
    floor_ms: Option<f64>,
) -> Option<crate::cross_check::CrossCheck> {
    for (r, walls) in rounds {
        let [Some(base_wall), Some(cand_wall)] = *walls else {
            continue;
        };
        let sample = |side: usize| -> Vec<PerfCase> {
            cases
                .iter()
                .filter_map(|c| {
                    let p = c.pairing.pairs_ms.as_ref()?.get(*r)?;
                    Some(PerfCase::new(&c.test_case_id, p[side]))
                })
                .collect()
        };
        let mut check = crate::cross_check::cross_check(
            &sample(0),
            base_wall,
            &sample(1),
            cand_wall,
            calls_per_case,
            floor_ms,
        );
        if check.verdict == crate::cross_check::Verdict::Inconsistent {
            check.reason = format!("round {}: {}", r + 1, check.reason);
            return Some(check);
        }
    }
    None
}

/// The median of wall seconds (for the cross-check), `None` if there are none.
pub fn median_wall(walls: &[f64]) -> Option<f64> {
    (!walls.is_empty()).then(|| median(&mut walls.to_vec()))
}

/// Fills a paired evaluation's performance from what the container left.
pub fn fill(
    e: &mut Evaluation,
    out: &Path,
    codes: &BTreeMap<String, i32>,
    plan: &PairedPlan,
    task_type: &str,
    note: Option<&str>,
) {
    if !e.correct() {
        return;
    }
    match collect_performance(out, codes, plan, task_type, note) {
        Ok((cases, source)) => {
            e.performance = cases;
            e.performance_source = Some(source);
        }
        Err(why) => e.performance_error = Some(why),
    }
    let steps: Vec<(String, &str)> = plan
        .runs()
        .map(|(r, name)| (run_name(r, name), whose(name)))
        .collect();
    e.autotuning = crate::autotune::read_runs(&out.join("perf"), crate::aka_perf::OUTPUT, &steps);
}

#[cfg(test)]
mod tests;
