use super::*;
use crate::fixture::{self, Spec};

#[test]
fn a_known_difference_is_found() {
    let a = fixture::run(30, 1, 1.0, 1).tasks;
    let b = fixture::run(30, 1, 1.5, 2).tasks;
    let c = compare("A", &a, "B", &b);
    // Every seventh task fails in both runs: 30 - 4 have a speedup in both.
    assert_eq!(c.paired, 26);
    let g = c.geomean_ratio.unwrap();
    assert!((g - 1.5).abs() < 0.05, "{g}");
    let (lo, hi) = c.geomean_ratio_interval.unwrap();
    assert!(lo > 1.4 && hi < 1.6 && lo < g && g < hi, "{lo} {hi}");
    assert!(c.wilcoxon.as_ref().unwrap().p_value < 1e-4);
    assert!(c.verdict.starts_with("B is faster than A"), "{}", c.verdict);
    // The other way round: slower.
    let c = compare("B", &b, "A", &a);
    assert!(c.verdict.starts_with("A is slower than B"), "{}", c.verdict);
}

#[test]
fn two_runs_of_the_same_agent_differ_by_noise_only() {
    let a = fixture::run(30, 1, 1.0, 1).tasks;
    let b = fixture::run(30, 1, 1.0, 3).tasks;
    let c = compare("A", &a, "B", &b);
    let w = c.wilcoxon.as_ref().unwrap();
    assert!(w.p_value > ALPHA, "{w:?}");
    assert!(
        c.verdict.starts_with("no significant difference"),
        "{}",
        c.verdict
    );
    let (lo, hi) = c.geomean_ratio_interval.unwrap();
    assert!(lo < 1.0 && 1.0 < hi, "{lo} {hi}");
    assert!(c.tasks.iter().all(|t| t.flip.is_none()));
}

#[test]
fn gate_flips_repeats_and_missing_tasks_are_named() {
    let spec = |id: &str, rep: u32, s: Option<f64>| Spec {
        task_id: id.into(),
        task_type: "t".into(),
        repeat: rep,
        speedup: s,
        noise: 0.0,
        unseen: false,
    };
    let a = vec![
        fixture::result(&spec("t/x/fixed", 0, None), 1),
        fixture::result(&spec("t/x/regressed", 0, Some(2.0)), 1),
        fixture::result(&spec("t/x/repeated", 0, Some(1.0)), 1),
        fixture::result(&spec("t/x/repeated", 1, Some(3.0)), 1),
        fixture::result(&spec("t/x/gone", 0, Some(1.0)), 1),
    ];
    let b = vec![
        fixture::result(&spec("t/x/fixed", 0, Some(1.2)), 1),
        fixture::result(&spec("t/x/regressed", 0, None), 1),
        fixture::result(&spec("t/x/repeated", 0, Some(2.0)), 1),
        fixture::result(&spec("t/x/repeated", 1, Some(4.0)), 1),
        fixture::result(&spec("t/x/new", 0, Some(1.0)), 1),
    ];
    let c = compare("A", &a, "B", &b);
    let t = |id: &str| c.tasks.iter().find(|t| t.task_id == id).unwrap();
    assert_eq!(t("t/x/fixed").flip, Some("fixed"));
    assert_eq!(t("t/x/regressed").flip, Some("regressed"));
    let r = t("t/x/repeated");
    assert_eq!((r.a.runs, r.a.mean_speedup, r.a.sigma), (2, 2.0, Some(1.0)));
    assert!((r.ratio.unwrap() - 1.5).abs() < 1e-9);
    assert_eq!(c.only_in_a, vec!["t/x/gone".to_string()]);
    assert_eq!(c.only_in_b, vec!["t/x/new".to_string()]);
    assert_eq!(c.paired, 1);
    assert!(
        c.verdict.ends_with("gates: 1 fixed, 1 regressed"),
        "{}",
        c.verdict
    );
    let md = c.markdown();
    assert!(
        md.contains(
            "| t/x/repeated | 2.000 ± 1.000 (2/2 correct) | 3.000 ± 1.000 (2/2 correct) | 1.500 |"
        ),
        "{md}"
    );
    assert!(md.contains("Only in A: t/x/gone"));
}
