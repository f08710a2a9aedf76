use super::*;

fn case(id: &str, pairs: &[(f64, f64)]) -> PerfCase {
    let mut c = PerfCase::new(id, 1.0);
    c.pairing.pairs_ms = Some(pairs.iter().map(|(b, c)| [*b, *c]).collect());
    c
}

#[test]
#[allow(clippy::approx_constant)] // 3.14 is a measurement of the published data set, not π
fn wilcoxon_exact_matches_published_examples() {
    // Hollander & Wolfe's depression scores (R's wilcox.test example): V = 40, p = 0.03906.
    let x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30];
    let y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29];
    let d: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
    let w = wilcoxon(&d).unwrap();
    assert_eq!((w.n, w.w_plus, w.method), (9, 40.0, "exact"));
    assert!((w.p_value - 0.0390625).abs() < 1e-12, "{w:?}");
    // Darwin's Zea mays differences (scipy's example): W- = 24, p = 0.041259765625.
    let d = [
        6.0, 8.0, 14.0, 16.0, 23.0, 24.0, 28.0, 29.0, 41.0, -48.0, 49.0, 56.0, 60.0, -67.0, 75.0,
    ];
    let w = wilcoxon(&d).unwrap();
    assert_eq!(w.w_plus, 120.0 - 24.0);
    assert!((w.p_value - 0.041259765625).abs() < 1e-12, "{w:?}");
}

#[test]
fn wilcoxon_normal_approximation_with_ties() {
    // 40 differences, all +1 but for ten −1: strongly positive, with ties.
    let mut d = vec![1.0; 30];
    d.extend([-1.0; 10]);
    let w = wilcoxon(&d).unwrap();
    assert_eq!(w.method, "normal");
    // Every |d| ties at rank 20.5: W+ = 30·20.5 = 615, mean 410, var = 40·41·81/24 − (40³−40)/48.
    assert_eq!(w.w_plus, 615.0);
    let var = 40.0 * 41.0 * 81.0 / 24.0 - (64000.0 - 40.0) / 48.0;
    let z = (615.0f64 - 410.0 - 0.5) / f64::sqrt(var);
    assert!((w.p_value - libm::erfc(z / std::f64::consts::SQRT_2)).abs() < 1e-12);
    assert!(w.p_value < 0.01);
    // Balanced differences: no evidence either way.
    let d: Vec<f64> = (1..=40)
        .map(|i| if i % 2 == 0 { i as f64 } else { -(i as f64) })
        .collect();
    assert!(wilcoxon(&d).unwrap().p_value > 0.5);
    assert!(wilcoxon(&[0.0, 0.0]).is_none());
}

#[test]
fn the_bootstrap_interval_holds_the_estimate_and_is_reproducible() {
    let noisy: Vec<(f64, f64)> = (0..10)
        .map(|i| (1.0 + 0.01 * (i % 3) as f64, 0.5 + 0.01 * (i % 4) as f64))
        .collect();
    let cases = [case("perf1", &noisy), case("perf2", &noisy)];
    let (lo, hi) = speedup_interval(&cases).unwrap();
    assert!(lo < hi && lo > 1.8 && hi < 2.2, "{lo} {hi}");
    assert_eq!(speedup_interval(&cases), Some((lo, hi)));
    // A case without pairs (a self-reported harness) gives no interval.
    assert!(speedup_interval(&[cases[0].clone(), PerfCase::new("x", 1.0)]).is_none());
    let exact: Vec<(f64, f64)> = vec![(2.0, 1.0); 5];
    assert_eq!(speedup_interval(&[case("p", &exact)]), Some((2.0, 2.0)));
}

#[test]
fn fast_p_counts_correct_tasks_faster_than_p() {
    let s = [0.0, 0.5, 1.0, 1.5, 3.0];
    assert_eq!(
        fast_p(&s, &[0.0, 1.0, 2.0]),
        vec![(0.0, 80.0), (1.0, 40.0), (2.0, 20.0)]
    );
    assert_eq!(fast_p(&[], &[1.0]), vec![(1.0, 0.0)]);
}

#[test]
fn mean_interval_needs_two_values() {
    assert!(mean_interval(&[1.0]).is_none());
    let (lo, hi) = mean_interval(&[1.0, 2.0, 3.0, 4.0]).unwrap();
    assert!(lo >= 1.0 && hi <= 4.0 && lo < 2.5 && hi > 2.5);
}

#[test]
fn pairs_measured_in_shared_rounds_are_samples_of_rounds() {
    // Two cases, three rounds; round 3's processes ran both cases 30% slow on one side.
    let rounds = [(1.0, 1.0), (1.0, 1.0), (1.3, 1.0)];
    let mk = |id: &str| {
        let mut c = case(id, &rounds);
        c.pairing.paired_by = Some(PairedBy::Round);
        c
    };
    assert_eq!(round_ratios(&[mk("a"), mk("b")]), Some(vec![1.0, 1.0, 1.3]));
    // Pairs measured apart are not rounds; unequal pair counts cannot be.
    assert_eq!(
        round_ratios(&[case("a", &rounds), case("b", &rounds)]),
        None
    );
    let mut short = mk("c");
    short.pairing.pairs_ms = Some(vec![[1.0, 1.0], [1.0, 1.0]]);
    assert_eq!(round_ratios(&[mk("a"), short]), None);
    // Three rounds hold no 95% interval: their range (75%).
    assert_eq!(speedup_interval(&[mk("a"), mk("b")]), Some((1.0, 1.3)));
}

#[test]
fn the_median_interval_is_exact_for_few_rounds() {
    // [min, max] of n values misses the median with probability 2^(1−n).
    assert!((median_coverage(5, 1) - 0.9375).abs() < 1e-12);
    assert!((median_coverage(6, 1) - 0.96875).abs() < 1e-12);
    // 10 values: [x(2), x(9)] covers 1 − 2·11/1024 = 97.85%, [x(3), x(8)] 89.06%.
    assert!((median_coverage(10, 2) - (1.0 - 22.0 / 1024.0)).abs() < 1e-12);
    assert!((median_coverage(10, 3) - (1.0 - 2.0 * 56.0 / 1024.0)).abs() < 1e-12);
    let xs: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(median_interval(&xs, 0.95), (2.0, 9.0));
    assert_eq!(median_interval(&xs, 0.999), (1.0, 10.0));
    assert_eq!(
        median_interval(&xs[..5], 0.95),
        (1.0, 5.0),
        "too few: the range"
    );
    assert_eq!(median_interval(&[4.0], 0.95), (4.0, 4.0));
}

#[test]
fn pairs_measured_in_sessions_are_samples_of_sessions() {
    // Two sessions of fresh processes, two pairs each; session 1's candidate process ran
    // 4% slow in both cases (where its memory landed), a bias no number of pairs within it
    // averages out.
    let pairs = [(1.0, 1.0), (1.0, 1.0), (1.04, 1.0), (1.04, 1.0)];
    let mk = |id: &str| {
        let mut c = case(id, &pairs);
        c.pairing.paired_by = Some(PairedBy::Session);
        c.pairing.pair_sessions = Some(vec![0, 0, 1, 1]);
        c
    };
    let cases = [mk("a"), mk("b")];
    assert_eq!(session_ratios(&cases), Some(vec![1.0, 1.04]));
    // The interval is over the sessions: it holds both.
    let (lo, hi) = speedup_interval(&cases).unwrap();
    assert!(lo <= 1.0 && hi >= 1.04, "{lo}–{hi}");
    // Sessions that do not line up, or a pair without one, are not sessions.
    let mut other = mk("c");
    other.pairing.pair_sessions = Some(vec![0, 0, 2, 2]);
    assert_eq!(session_ratios(&[mk("a"), other]), None);
    let mut short = mk("d");
    short.pairing.pair_sessions = Some(vec![0, 1]);
    assert_eq!(session_ratios(&[short]), None);
    assert_eq!(session_ratios(&[case("e", &pairs)]), None);
}
