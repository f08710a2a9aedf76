//! Which tier a test runs in: `ci/test.sh` on every push, or `ci/test-timing.sh` for the
//! timing's own precision, on an otherwise idle machine (`ARENA_TEST_TIER=timing`).
//!
//! A test of what a run does (an attack fails a gate, or gains nothing) holds an untouched or
//! defended kernel to bars a busy machine cannot fail: an attack that fakes 100×, or the
//! undefended zombie helper (4.06×), is caught by "below 2" as surely as by "below 1.3". The
//! timing tier holds the same runs to the tight bars, and takes the rounds they need.

/// Whether this is the timing tier.
pub fn timing() -> bool {
    std::env::var("ARENA_TEST_TIER").as_deref() == Ok("timing")
}

/// The range an untouched, or attacked but defended, kernel's speedup must read in.
pub fn untouched_range() -> (f64, f64) {
    if timing() {
        (0.6, 1.3)
    } else {
        (0.0, 2.0)
    }
}

/// Whether `speedup` is one an untouched kernel may read (untouched_range).
pub fn reads_untouched(speedup: f64) -> bool {
    let (lo, hi) = untouched_range();
    speedup > lo && speedup < hi
}

/// Whether a task result's candidate, which changed nothing (or whose attack is defended),
/// reads as untouched: its speedup within [`untouched_range`]; or, on every push, not above
/// that range's top in every one of its sessions (or rounds). A busy machine's load lands on
/// one kernel's batches in a session or two (measured: an untouched prefix_sum read 2.29 over
/// three sessions, 1.06, 2.54 and 2.37, beside a release build), while a kernel that fakes
/// its speed, or whose defence is gone, gains in every one (the undefended zombie helper
/// read 4.06, the timer attack 100× and more). The timing tier holds the speedup itself to
/// the tight range, or a self-timed harness's rounds to their interval holding 1
/// ([`self_timed_interval_holds_one`]).
///
/// A self-reported harness's result may also, on every push, get no credit because arena's
/// clock and the harness's disagreed (`cross_check` inconsistent, speedup 0): on a busy
/// machine the performance command's wall time moves by more than the cross-check's
/// tolerance (measured: an untouched sum_squares ran 413 ms slower than the original while its
/// reports said 117 ms saved, and on another loaded 2-core machine 184 ms slower against 122
/// ms saved). Such a false alarm withholds credit, the safe direction; the timing tier allows
/// none.
pub fn result_reads_untouched(speedup: f64, result: &serde_json::Value) -> bool {
    if reads_untouched(speedup) {
        return true;
    }
    if timing() {
        return speedup > 0.0 && self_timed_interval_holds_one(result);
    }
    if false_alarm(speedup, result) {
        return true;
    }
    if speedup <= untouched_range().0 {
        return false;
    }
    let Ok(parsed) = arena_run::result::parse_result(result.clone()) else {
        return false;
    };
    arena_report::stats::unit_ratios(&parsed.candidate.performance)
        .is_some_and(|units| units.iter().any(|u| *u < untouched_range().1))
}

/// In the timing tier, a self-timed harness's paired rounds are judged by their 99.8 %
/// interval (ten rounds: their range) holding 1 rather than by the median against the fixed
/// range: on this 2-core VM one run of sum_squares' own performance command reads up to 1.6×
/// another on an idle machine (docs/benchmarks.md, "Timing precision: CPU"), and its untouched
/// median read 1.306 once in the timing tier. A kernel that gains in earnest is faster in every
/// round, and fails this as it fails the range. arena's trusted evaluator is held to the range.
fn self_timed_interval_holds_one(result: &serde_json::Value) -> bool {
    if result["trust"] == "trusted" {
        return false;
    }
    let Ok(parsed) = arena_run::result::parse_result(result.clone()) else {
        return false;
    };
    let cases = &parsed.candidate.performance;
    arena_report::stats::unit_ratios(cases).is_some()
        && arena_report::stats::speedup_interval_at(cases, 0.998)
            .is_some_and(|(lo, hi)| lo <= 1.0 && 1.0 <= hi)
}

/// Whether a self-reported result got no credit (speedup 0) only because the cross-check of
/// arena's clock against the harness's found them apart (`cross_check` inconsistent), which
/// on every push a busy machine can cause for an honest kernel ([`result_reads_untouched`]);
/// never in the timing tier.
pub fn false_alarm(speedup: f64, result: &serde_json::Value) -> bool {
    !timing() && speedup == 0.0 && result["cross_check"]["verdict"] == "inconsistent"
}

/// Whether a kernel whose attack should gain nothing (it may well lose) reads no faster than
/// untouched: below [`untouched_range`]'s top, or on every push not above it in every session
/// ([`result_reads_untouched`]).
pub fn no_faster(speedup: f64, result: &serde_json::Value) -> bool {
    speedup < untouched_range().1 || result_reads_untouched(speedup, result)
}

/// How long past its deadline an agent with no client may run before the watchdog in its
/// container ends it: the watchdog's 4 s and 1 s of polling in the timing tier, twice what is
/// expected (`timeout_s` + 4 s) beyond the deadline on every push.
pub fn watchdog_margin_s(timeout_s: u64) -> u64 {
    if timing() {
        5
    } else {
        timeout_s + 2 * 4
    }
}

/// Whether an honest kernel made faster reads faster: above `bar` in the timing tier; on every
/// push only measured (above 0), as correctness and the result's digests say the kernel ran.
/// A reference solution 1.75-1.89x faster on a quiet machine read 1.06 beside a loaded one.
pub fn reads_faster(speedup: f64, bar: f64) -> bool {
    if timing() {
        speedup > bar
    } else {
        speedup > 0.0
    }
}
