//! Statistics the reports and comparisons print: bootstrap intervals (seeded, so that a report
//! is the same bytes every time it is made), the Wilcoxon signed-rank test and fast_p curves.

use arena_eval::paired::median;
use arena_eval::record::{PairedBy, PerfCase};

/// Resamples per bootstrap interval; the seed is fixed so that reports are reproducible.
pub const RESAMPLES: usize = 1000;
const SEED: u64 = 0x0a7e_4a5e_ed00_0001;

/// The `q` quantile (0–1) of sorted `xs`, linearly interpolated.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// The paired (baseline, candidate) batch times of a case, from the trusted evaluator's
/// `pairs_ms`, where it has them.
pub fn pairs(case: &PerfCase) -> Option<Vec<(f64, f64)>> {
    times_of(case.pairing.pairs_ms.as_deref()?)
}

/// The (other kernel, candidate) batch times of `pairs` (a case's `pairs_ms`, or its
/// `compiled_pairs_ms`: the original compiled by torch.compile beside the candidate), where
/// there are at least two, all of them times.
pub fn times_of(pairs: &[[f64; 2]]) -> Option<Vec<(f64, f64)>> {
    let p: Vec<(f64, f64)> = pairs
        .iter()
        .map(|&[b, c]| (b, c))
        .filter(|(b, c)| *b > 0.0 && *c > 0.0 && b.is_finite() && c.is_finite())
        .collect();
    (p.len() >= 2 && p.len() == pairs.len()).then_some(p)
}

/// A case's speedup from its pairs: the median over the pairs of baseline / candidate (a
/// drift that moves both kernels of a pair alike cancels in each ratio).
pub fn pair_ratio(pairs: &[(f64, f64)]) -> f64 {
    let mut r: Vec<f64> = pairs.iter().map(|(b, c)| b / c).collect();
    median(&mut r)
}

/// A 95% interval for a task's speedup (the mean over cases of the median pair ratio,
/// [`pair_ratio`]): for pairs measured in rounds ([`round_ratios`]) the distribution-free
/// interval of the rounds' ratios ([`median_interval`]), else a percentile bootstrap that
/// resamples each case's pairs. `None` unless every case has paired samples.
pub fn speedup_interval(cases: &[PerfCase]) -> Option<(f64, f64)> {
    speedup_interval_at(cases, 0.95)
}

/// [`speedup_interval`] holding `level` (0–1).
pub fn speedup_interval_at(cases: &[PerfCase], level: f64) -> Option<(f64, f64)> {
    if let Some(units) = unit_ratios(cases) {
        return Some(median_interval(&units, level));
    }
    Some(interval_at(&speedup_resampler(cases)?, level))
}

/// The speedups of the independent units the pairs were measured in, where they were:
/// rounds ([`round_ratios`]) or sessions of fresh processes ([`session_ratios`]).
pub fn unit_ratios(cases: &[PerfCase]) -> Option<Vec<f64>> {
    round_ratios(cases).or_else(|| session_ratios(cases))
}

/// Pairs measured in sessions of fresh kernel processes (the trusted evaluator on a CPU:
/// `paired_by: "session"`, `pair_sessions` naming each pair's session): each session's
/// speedup, the mean over cases of the median of that session's pair ratios. A process's own
/// speed is one sample per session, so the sessions, not the pairs, are the samples. `None`
/// for other pairs, or where a case lacks a session or the cases do not share them.
pub fn session_ratios(cases: &[PerfCase]) -> Option<Vec<f64>> {
    let mut per_case: Vec<std::collections::BTreeMap<u64, Vec<f64>>> = Vec::new();
    for c in cases {
        if c.pairing.paired_by != Some(PairedBy::Session) {
            return None;
        }
        let p = pairs(c)?;
        let sessions = c.pairing.pair_sessions.clone()?;
        if sessions.len() != p.len() {
            return None;
        }
        let mut by = std::collections::BTreeMap::<u64, Vec<f64>>::new();
        for ((b, c), s) in p.iter().zip(sessions) {
            by.entry(s).or_default().push(b / c);
        }
        per_case.push(by);
    }
    let first = per_case.first()?;
    if per_case.iter().any(|m| !m.keys().eq(first.keys())) {
        return None;
    }
    Some(
        first
            .keys()
            .map(|s| {
                per_case
                    .iter()
                    .map(|m| median(&mut m[s].clone()))
                    .sum::<f64>()
                    / per_case.len() as f64
            })
            .collect(),
    )
}

/// Pairs measured in rounds shared by every case ([`by_round`]): each round's speedup, the
/// mean over cases of that round's baseline / candidate. `None` for other pairs.
pub fn round_ratios(cases: &[PerfCase]) -> Option<Vec<f64>> {
    let per_case: Vec<Vec<(f64, f64)>> = cases.iter().map(pairs).collect::<Option<_>>()?;
    if per_case.is_empty() || !by_round(cases, &per_case) {
        return None;
    }
    Some(
        (0..per_case[0].len())
            .map(|r| per_case.iter().map(|p| p[r].0 / p[r].1).sum::<f64>() / per_case.len() as f64)
            .collect(),
    )
}

/// The coverage of the order-statistic interval [x(k), x(n+1−k)] for the median of n
/// values: 1 − 2·P(Binomial(n, ½) < k).
pub fn median_coverage(n: usize, k: usize) -> f64 {
    let mut below = 0.0;
    let mut c = 1.0; // C(n, i)
    for i in 0..k.min(n + 1) {
        if i > 0 {
            c = c * (n + 1 - i) as f64 / i as f64;
        }
        below += c;
    }
    1.0 - 2.0 * below / 2f64.powi(n as i32)
}

/// The distribution-free interval for the median of `xs` (exchangeable rounds): the
/// narrowest order-statistic interval [x(k), x(n+1−k)] (the largest k) whose coverage is at
/// least `level`, or [min, max] where even that covers less (fewer than 6 values hold no 95% interval: [min, max] of five holds
/// 93.75%). A bootstrap of a median of so few values is narrower than that, and under-covers.
pub fn median_interval(xs: &[f64], level: f64) -> (f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let k = (1..=n.div_ceil(2))
        .rev()
        .find(|&k| median_coverage(n, k) >= level)
        .unwrap_or(1);
    (v[k - 1], v[n - k])
}

/// The 95% percentile interval of bootstrap draws.
pub fn interval(draws: &[f64]) -> (f64, f64) {
    interval_at(draws, 0.95)
}

/// The percentile interval of bootstrap draws holding `level` (0–1) of them.
pub fn interval_at(draws: &[f64], level: f64) -> (f64, f64) {
    let mut sorted = draws.to_vec();
    sorted.sort_by(f64::total_cmp);
    let tail = (1.0 - level.clamp(0.0, 1.0)) / 2.0;
    (quantile(&sorted, tail), quantile(&sorted, 1.0 - tail))
}

/// Whether the cases' pairs come in rounds shared by every case (a paired self-reported
/// evaluation: pair `i` of every case was measured by the same two processes, and a process
/// that runs slow slows all its cases): then the rounds, not the pairs, are the samples.
fn by_round(cases: &[PerfCase], per_case: &[Vec<(f64, f64)>]) -> bool {
    cases
        .iter()
        .all(|c| c.pairing.paired_by == Some(PairedBy::Round))
        && per_case.windows(2).all(|w| w[0].len() == w[1].len())
}

/// The [`RESAMPLES`] bootstrap draws of that speedup, in draw order (seeded: the same cases
/// give the same draws), resampling each case's pairs apart; `None` unless every case has
/// paired samples. (Pairs measured in rounds take [`round_ratios`] instead.)
pub fn speedup_resampler(cases: &[PerfCase]) -> Option<Vec<f64>> {
    let per_case: Vec<Vec<(f64, f64)>> = cases.iter().map(pairs).collect::<Option<_>>()?;
    if per_case.is_empty() {
        return None;
    }
    let ratios: Vec<Vec<f64>> = per_case
        .iter()
        .map(|p| p.iter().map(|(b, c)| b / c).collect())
        .collect();
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut stats = Vec::with_capacity(RESAMPLES);
    let mut draw = Vec::new();
    for _ in 0..RESAMPLES {
        let mut sum = 0.0;
        for r in &ratios {
            draw.clear();
            draw.extend((0..r.len()).map(|_| r[rng.usize(..r.len())]));
            sum += median(&mut draw);
        }
        stats.push(sum / ratios.len() as f64);
    }
    Some(stats)
}

/// A 95% percentile-bootstrap interval for the mean of `xs` (resampling the values).
pub fn mean_interval(xs: &[f64]) -> Option<(f64, f64)> {
    if xs.len() < 2 {
        return None;
    }
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            (0..xs.len())
                .map(|_| xs[rng.usize(..xs.len())])
                .sum::<f64>()
                / xs.len() as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    Some((quantile(&means, 0.025), quantile(&means, 0.975)))
}

/// The Wilcoxon signed-rank test of paired differences against zero, two-sided.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Wilcoxon {
    /// Differences that were not zero (zeros are dropped, as Wilcoxon's original test does).
    pub n: usize,
    /// The sum of the ranks of the positive differences.
    pub w_plus: f64,
    pub p_value: f64,
    /// `exact` (the full null distribution, for n ≤ 30 without ties) or `normal` (with tie and
    /// continuity corrections).
    pub method: &'static str,
}

/// Ranks of |d| (1-based), ties given their average rank.
fn ranks(abs: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..abs.len()).collect();
    idx.sort_by(|&a, &b| abs[a].total_cmp(&abs[b]));
    let mut r = vec![0.0; abs.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && abs[idx[j + 1]] == abs[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for k in &idx[i..=j] {
            r[*k] = avg;
        }
        i = j + 1;
    }
    r
}

pub fn wilcoxon(diffs: &[f64]) -> Option<Wilcoxon> {
    let d: Vec<f64> = diffs
        .iter()
        .copied()
        .filter(|x| *x != 0.0 && x.is_finite())
        .collect();
    let n = d.len();
    if n == 0 {
        return None;
    }
    let abs: Vec<f64> = d.iter().map(|x| x.abs()).collect();
    let r = ranks(&abs);
    let w_plus: f64 = d
        .iter()
        .zip(&r)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, r)| r)
        .sum();
    let ties = r.iter().any(|x| x.fract() != 0.0);
    let total = (n * (n + 1) / 2) as f64;
    if n <= 30 && !ties {
        // counts[s] = subsets of {1..n} whose ranks sum to s.
        let max = n * (n + 1) / 2;
        let mut counts = vec![0f64; max + 1];
        counts[0] = 1.0;
        for k in 1..=n {
            for s in (k..=max).rev() {
                counts[s] += counts[s - k];
            }
        }
        let all: f64 = counts.iter().sum();
        let low = w_plus.min(total - w_plus) as usize;
        let tail: f64 = counts[..=low].iter().sum::<f64>() / all;
        return Some(Wilcoxon {
            n,
            w_plus,
            p_value: (2.0 * tail).min(1.0),
            method: "exact",
        });
    }
    let mean = total / 2.0;
    // Tie correction: each group of t tied ranks lowers the variance by (t³ − t) / 48.
    let mut sorted = r.clone();
    sorted.sort_by(f64::total_cmp);
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let j = sorted[i..].iter().take_while(|x| **x == sorted[i]).count();
        tie_term += ((j * j * j) - j) as f64;
        i += j;
    }
    let var = (n * (n + 1) * (2 * n + 1)) as f64 / 24.0 - tie_term / 48.0;
    if var <= 0.0 {
        return None;
    }
    let z = ((w_plus - mean).abs() - 0.5).max(0.0) / var.sqrt();
    Some(Wilcoxon {
        n,
        w_plus,
        p_value: libm::erfc(z / std::f64::consts::SQRT_2).min(1.0),
        method: "normal",
    })
}

/// fast_p: the share (0–100) of `speedups` (one per task, 0 for a failed task) that are
/// correct and faster than `p`, for each p of `ps`.
pub fn fast_p(speedups: &[f64], ps: &[f64]) -> Vec<(f64, f64)> {
    ps.iter()
        .map(|&p| {
            let n = speedups.iter().filter(|s| **s > 0.0 && **s > p).count();
            let share = if speedups.is_empty() {
                0.0
            } else {
                100.0 * n as f64 / speedups.len() as f64
            };
            (p, share)
        })
        .collect()
}

#[cfg(test)]
mod tests;
