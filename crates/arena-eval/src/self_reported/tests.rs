use super::*;

fn cfg() -> TaskConfig {
    let text = "task_type: triton2triton\nsource_file_path: [k.py]\n\
         compile_command: [\"python3 run.py compile\"]\n\
         correctness_command: [\"python3 run.py correctness\", \"echo 'ok'\"]\n\
         performance_command: [\"python3 run.py performance\"]\n";
    TaskConfig::parse(std::path::Path::new("config.yaml"), text).unwrap()
}

#[test]
fn one_kernel_runs_the_gates_in_its_own_tree_as_its_own_user() {
    let j = GatesJob::gates(
        &cfg(),
        &GateTimeouts::default(),
        &["PATH=/x".into(), "HOME=/root".into()],
        vec![44],
        BASELINE,
        1000,
    );
    let names: Vec<&str> = j.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["compile", "correctness", "performance"]);
    assert_eq!(
        j.steps[1].commands,
        ["python3 run.py correctness", "echo 'ok'"]
    );
    for s in &j.steps {
        assert!(!s.go_on);
        assert_eq!(s.user.uid, BASELINE.uid);
        assert_eq!(s.cwd, "/arena/kernels/60001");
        assert_eq!(s.tree.as_deref(), Some("/arena/kernels/60001"));
        assert_eq!(s.env["HOME"], "/scratch/60001");
        assert_eq!(s.env["TRITON_CACHE_DIR"], "/scratch/60001/.triton");
        assert_eq!(s.reports.as_deref(), Some("reports"));
    }
    // Only the performance command's output is kept (GEAK harnesses print their time).
    assert_eq!(j.steps[2].capture.as_deref(), Some("reports/output"));
    assert!(j.steps[0].capture.is_none());
    assert_eq!(j.env["PATH"], "/x");
    assert_eq!(j.trees.len(), 1);
    assert!(j.trees[0].overlay.is_empty());
    assert!(j.floor.is_none());
    assert_eq!(j.deadline_s, 600 + 900 + 1800 + 30);
    assert_eq!(j.limit_s(), j.deadline_s + 30);
    // The tree is root's (the kernel's group may add files, the sticky bit keeps it from
    // replacing the task's), build/ and the scratch are the kernel's; none open to others.
    let modes: Vec<(&str, u32, u32, u32)> = j
        .spaces
        .iter()
        .map(|s| (s.destination.as_str(), s.mode, s.uid, s.gid))
        .collect();
    assert_eq!(
        modes,
        [
            ("/arena/kernels/60001", 0o1770, 0, 60001),
            ("/arena/kernels/60001/build", 0o750, 60001, 60001),
            ("/scratch/60001", 0o700, 60001, 60001),
        ]
    );
    assert_eq!(j.spaces[0].bytes, 1000 + TREE_SLACK);
    let v = serde_json::to_value(&j).unwrap();
    assert!(
        v.get("spaces").is_none(),
        "the runner's business, not the gate runner's"
    );
    assert_eq!(v["steps"][0]["user"]["uid"], 60001);
}

#[test]
fn a_paired_job_compiles_both_then_interleaves_their_runs_in_the_plans_order() {
    let plan = PairedPlan::new(2, 11);
    let overlay = vec![Overlay {
        rel: "k.py".into(),
        from: "/arena/candidate/k.py".into(),
    }];
    let j = GatesJob::paired(
        &cfg(),
        &GateTimeouts::default(),
        &[],
        vec![],
        &plan,
        overlay,
        10,
    );
    let names: Vec<String> = j.steps.iter().map(|s| s.name.clone()).collect();
    let mut want = vec![
        "compile".to_string(),
        "correctness".into(),
        "baseline-compile".into(),
    ];
    want.extend(plan.runs().map(|(r, role)| run_name(r, role)));
    assert_eq!(names, want);
    let uid_of = |name: &str| j.steps.iter().find(|s| s.name == name).unwrap().user.uid;
    assert_eq!(uid_of("compile"), CANDIDATE.uid);
    assert_eq!(uid_of("baseline-compile"), BASELINE.uid);
    assert_eq!(uid_of("perf1-baseline"), BASELINE.uid);
    assert_eq!(uid_of("perf1-candidate"), CANDIDATE.uid);
    let perf: Vec<&Step> = j
        .steps
        .iter()
        .filter(|s| s.name.starts_with("perf"))
        .collect();
    assert_eq!(perf.len(), 4);
    assert!(perf[0].floor_first && perf[1..].iter().all(|s| !s.floor_first));
    assert!(j.steps[..3].iter().all(|s| !s.floor_first));
    // The probe runs beside the original's compile, never beside the agent's steps.
    let starts: Vec<&str> = j
        .steps
        .iter()
        .filter(|s| s.floor_start)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(starts, ["baseline-compile"]);
    assert_eq!((j.trees[0].gid, j.trees[1].gid), (60001, 60002));
    for s in &perf {
        assert_eq!(
            s.reports.as_deref(),
            Some(format!("perf/{}", s.name).as_str())
        );
        assert_eq!(
            s.capture.as_deref(),
            Some(format!("perf/{}/output", s.name).as_str())
        );
        assert_eq!(s.timeout, 1800);
        // Triton says what its autotuning chose, in the output kept.
        assert_eq!(
            s.env.get("TRITON_PRINT_AUTOTUNING").map(String::as_str),
            Some("1")
        );
    }
    assert!(j.steps[..3]
        .iter()
        .all(|s| !s.env.contains_key("TRITON_PRINT_AUTOTUNING")));
    assert_eq!(j.trees[0].path, "/arena/kernels/60001");
    assert!(j.trees[0].overlay.is_empty());
    assert_eq!(j.trees[1].path, "/arena/kernels/60002");
    assert_eq!(j.trees[1].overlay[0].from, "/arena/candidate/k.py");
    assert_eq!(j.floor.as_ref().unwrap().user.uid, FLOOR_UID);
    assert_eq!(j.spaces.len(), 6);
    assert_eq!(
        j.deadline_s,
        600 + 900 + 600 + 4 * 1800 + 30 + FLOOR_TIMEOUT_S
    );
}

#[test]
fn a_probe_compiles_once_and_judges_each_configuration_from_its_view() {
    let j = GatesJob::probe(&cfg(), &GateTimeouts::default(), 3, &[], vec![]);
    assert_eq!(j.steps.len(), 4);
    assert_eq!(j.steps[0].cwd, "/task");
    assert_eq!(j.steps[2].name, "probe1");
    assert_eq!(j.steps[2].cwd, "/arena/views/1");
    assert!(j.steps[1..].iter().all(|s| s.go_on && s.tree.is_none()));
    assert!(j.steps.iter().all(|s| s.user.uid == HARNESS_UID));
    assert_eq!(j.spaces[0].destination, "/task/build");
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("gates"), "compile 0\nprobe0 0\nprobe1 1\n").unwrap();
    assert_eq!(read_probe(d.path(), 3), Some(vec![true, false, false]));
    std::fs::write(d.path().join("gates"), "compile 1\n").unwrap();
    assert_eq!(read_probe(d.path(), 3), None);
}
