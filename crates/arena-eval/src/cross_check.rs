//! Checking a self-reported harness's times against arena's own clock. A harness that times
//! itself can be lied to by the kernel it imports (a patched clock, a skipped loop); what it
//! cannot hide is how long its performance command really ran, which arena's gate runner
//! measures from outside. Three checks, each with a named reason when it fails:
//!
//! 1. no case may take less than a call can (a floor: the device's, measured in the evaluator
//!    container by arena's floor probe, or [`FLOOR_MS`]);
//! 2. the times reported, over the calls the harness says it makes, must fit in the wall
//!    time of the command;
//! 3. where the harness declares its iteration counts, the time the candidate claims to save
//!    over the original (per call, times the calls) must show up as a shorter command, within
//!    a tolerance for the command's own noise.

use serde::{Deserialize, Serialize};

use crate::record::PerfCase;

/// No call of a kernel takes less than this (a Python call is about 0.05 µs; no harness
/// measures below 0.1 µs).
pub const FLOOR_MS: f64 = 1e-4;
/// Slack in the differential check: the larger of this and a quarter of the original's wall
/// time (interpreter start, imports, input generation vary run to run).
pub const MIN_TOLERANCE_MS: f64 = 250.0;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every check that applies passed.
    Consistent,
    /// A check failed: the reported times are not to be believed.
    Inconsistent,
    /// The differential check does not apply (no declared iteration counts); only the floor
    /// and the wall-time bound were checked.
    Partial,
}

/// A case may report down to this share of the device floor's cheapest call (the floor is a
/// tiny kernel; a harness's call could be cheaper still, but not by half).
pub const FLOOR_SHARE: f64 = 0.5;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    pub verdict: Verdict,
    pub reason: String,
    /// Wall seconds of the performance commands, by arena's clock (the median over the runs
    /// of each kernel in a paired evaluation).
    pub baseline_wall_s: f64,
    pub candidate_wall_s: f64,
    /// The floor the cases were checked against, in ms.
    #[serde(default)]
    pub floor_ms: f64,
    /// Performance runs of each kernel the wall times are the median of (paired evaluations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_per_kernel: Option<usize>,
    /// Calls per case the harness declares (warm-up and timed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_case: Option<u64>,
    /// Milliseconds the candidate's reports claim to save, and the command ran shorter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_saving_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_saving_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance_ms: Option<f64>,
}

fn measured(cases: &[PerfCase]) -> Vec<(&str, f64)> {
    cases
        .iter()
        .filter(|c| c.measured())
        .map(|c| (c.test_case_id.as_str(), c.execution_time_ms))
        .collect()
}

/// Checks the candidate's reported cases against the wall times of the performance commands
/// (baseline's and candidate's), with `calls_per_case` the calls the harness makes per case
/// (warm-ups included), where it declares them, and the device's floor where it was measured.
pub fn cross_check(
    baseline: &[PerfCase],
    baseline_wall_s: f64,
    candidate: &[PerfCase],
    candidate_wall_s: f64,
    calls_per_case: Option<u64>,
    device_floor_ms: Option<f64>,
) -> CrossCheck {
    let floor = device_floor_ms.unwrap_or(FLOOR_MS).max(FLOOR_MS);
    let mut out = CrossCheck {
        verdict: Verdict::Consistent,
        reason: String::new(),
        baseline_wall_s,
        candidate_wall_s,
        floor_ms: floor,
        runs_per_kernel: None,
        calls_per_case,
        claimed_saving_ms: None,
        observed_saving_ms: None,
        tolerance_ms: None,
    };
    let fail = |mut o: CrossCheck, why: String| {
        o.verdict = Verdict::Inconsistent;
        o.reason = why;
        o
    };
    let cand = measured(candidate);
    if let Some((id, ms)) = cand.iter().find(|(_, ms)| *ms < floor) {
        return fail(
            out,
            format!(
                "case {id} reports {ms:e} ms, less than any call takes on this device ({floor:e} ms)"
            ),
        );
    }
    let calls = calls_per_case.unwrap_or(1) as f64;
    let reported: f64 = cand.iter().map(|(_, ms)| ms * calls).sum();
    if reported > candidate_wall_s * 1000.0 * 1.05 + 1.0 {
        return fail(
            out,
            format!(
                "the reports add up to {reported:.1} ms over {calls} calls per case, but the \
                 performance command ran {:.1} ms",
                candidate_wall_s * 1000.0
            ),
        );
    }
    let Some(n) = calls_per_case else {
        out.verdict = Verdict::Partial;
        out.reason = "the harness declares no WARMUP_ITERATIONS and BENCHMARK_ITERATIONS: only \
                      the floor and the wall-time bound were checked"
            .into();
        return out;
    };
    let base: std::collections::BTreeMap<&str, f64> = measured(baseline).into_iter().collect();
    let claimed: f64 = cand
        .iter()
        .filter_map(|(id, c)| base.get(id).map(|b| (b - c) * n as f64))
        .sum();
    let observed = (baseline_wall_s - candidate_wall_s) * 1000.0;
    let tolerance = MIN_TOLERANCE_MS.max(0.25 * baseline_wall_s * 1000.0);
    out.claimed_saving_ms = Some(claimed);
    out.observed_saving_ms = Some(observed);
    out.tolerance_ms = Some(tolerance);
    if claimed - observed > tolerance {
        return fail(
            out,
            format!(
                "the reports claim {claimed:.0} ms saved over {n} calls per case, but the \
                 performance command ran only {observed:.0} ms shorter than the original's \
                 (tolerance {tolerance:.0} ms): the harness's clock disagrees with arena's"
            ),
        );
    }
    out.reason = format!(
        "claimed saving {claimed:.0} ms, observed {observed:.0} ms (tolerance {tolerance:.0} ms)"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases(ms: &[f64]) -> Vec<PerfCase> {
        ms.iter()
            .enumerate()
            .map(|(i, m)| PerfCase::new(&format!("perf{}", i + 1), *m))
            .collect()
    }

    #[test]
    fn an_honest_speedup_agrees_with_the_clock() {
        // 12 calls per case; the candidate saves 25 ms a round: 300 ms, and the command
        // ran 290 ms shorter.
        let c = cross_check(
            &cases(&[5.0, 40.0]),
            0.70,
            &cases(&[2.0, 18.0]),
            0.41,
            Some(12),
            None,
        );
        assert_eq!(c.verdict, Verdict::Consistent, "{}", c.reason);
        assert_eq!(c.claimed_saving_ms.unwrap().round(), 300.0);
    }

    #[test]
    fn a_patched_clock_is_caught() {
        // The kernel is unchanged (the command takes as long) but reports 1/100 of the time.
        let c = cross_check(
            &cases(&[5.0, 40.0]),
            0.70,
            &cases(&[0.05, 0.4]),
            0.71,
            Some(12),
            None,
        );
        assert_eq!(c.verdict, Verdict::Inconsistent);
        assert!(c.reason.contains("disagrees with arena's"), "{}", c.reason);
        let tiny = cross_check(&cases(&[5.0]), 0.7, &cases(&[1e-6]), 0.7, None, None);
        assert_eq!(tiny.verdict, Verdict::Inconsistent);
        assert!(
            tiny.reason.contains("less than any call"),
            "{}",
            tiny.reason
        );
    }

    #[test]
    fn reports_longer_than_the_command_are_refused_and_unknown_counts_check_less() {
        let c = cross_check(&cases(&[5.0]), 0.7, &cases(&[500.0]), 0.6, Some(10), None);
        assert_eq!(c.verdict, Verdict::Inconsistent);
        assert!(c.reason.contains("ran 600.0 ms"), "{}", c.reason);
        let p = cross_check(&cases(&[5.0]), 0.7, &cases(&[0.05]), 0.7, None, None);
        assert_eq!(p.verdict, Verdict::Partial);
    }

    #[test]
    fn a_time_below_the_devices_floor_is_refused() {
        // The probe found a graph-replayed launch takes 2 µs: half of it is the floor.
        let probe: crate::evaluator_record::FloorProbe =
            serde_json::from_str(r#"{"cpu_call_ms": 3e-5, "gpu": {"graph_launch_ms": 0.002}}"#)
                .unwrap();
        let floor = probe.floor_ms();
        assert_eq!(floor, Some(0.001));
        let c = cross_check(&cases(&[0.05]), 0.7, &cases(&[0.0004]), 0.7, None, floor);
        assert_eq!(c.verdict, Verdict::Inconsistent);
        assert!(
            c.reason.contains("on this device (1e-3 ms)"),
            "{}",
            c.reason
        );
        assert_eq!(c.floor_ms, 0.001);
        // 1.5 µs clears it; without a GPU only the fixed floor applies.
        let ok = cross_check(&cases(&[0.05]), 0.7, &cases(&[0.0015]), 0.7, None, floor);
        assert_eq!(ok.verdict, Verdict::Partial, "{}", ok.reason);
    }
}
