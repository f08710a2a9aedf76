//! `arenactl run` end to end on the CPU sample tasks, through a real containerd (a private
//! daemon per test, started by ci/containerd.sh) and the in-process gRPC runner: three scripted
//! agents (one optimizes, one breaks correctness, one tampers with the harness), a runner
//! killed with SIGKILL and restarted on its run directory, a run directory whose file system
//! fills up, and the refusal of drifted digests.
//! Needs root, containerd and runc (ci/setup.sh installs them).

use crate::common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::daemon::*;
use common::repo;
use serde_json::Value;

#[test]
fn three_scripted_agents_and_drift_refusal() {
    let d = Daemon::start();
    let tmp = d.dir.path();

    // An agent that truly optimizes: faster and still correct (with JSON logs: each event
    // carries its run → task → container spans).
    let o = arenactl()
        .args(d.run_args_all("ci/agents/optimize.toml", &tmp.join("optimize")))
        .args(["--json", "--log-format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ended: Vec<Value> = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["fields"]["message"] == "container ended")
        .collect();
    assert_eq!(ended.len(), 9, "3 containers of 3 task runs");
    for l in &ended {
        let names: Vec<&str> = l["spans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["run", "task", "container"], "{l}");
    }
    assert_eq!(report["state"], "done");
    let tasks = report["report"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3);
    let optimized = results(&tmp.join("optimize"));
    for t in tasks {
        assert_eq!(t["correct"], true, "{t}");
        let s = t["speedup"].as_f64().unwrap();
        // A self-reported task's cross-check may, on a busy machine, withhold the credit
        // (common::tier::false_alarm); never a trusted one's.
        let r = optimized
            .iter()
            .find(|r| r["task_id"] == t["task_id"])
            .unwrap_or_else(|| panic!("no result for {t}"));
        if common::tier::false_alarm(s, r) {
            assert_eq!(r["trust"], "self_reported_cross_checked", "{r}");
            continue;
        }
        assert!(
            common::tier::reads_faster(s, 1.0),
            "optimized kernel not measured faster: {t}"
        );
        assert!(t["score"].as_f64().unwrap() > 120.0, "{t}");
    }
    for r in results(&tmp.join("optimize")) {
        // Every digest the result depends on is recorded.
        for k in [
            "image",
            "agent_image",
            "task",
            "harness",
            "agent",
            "lockfile",
        ] {
            assert!(
                r["provenance"][k].as_str().unwrap().starts_with("sha256:"),
                "{k}: {r}"
            );
        }
        assert_eq!(r["baseline"]["compile"]["status"], "ok");
        // The run's timing settings (CHEAP_TIMING) reach its evaluators: 3 pairs of the
        // trusted evaluator, 2 rounds of a self-reported harness.
        let case = &r["candidate"]["performance"][0];
        let pairs = case["pairs_ms"].as_array().map_or(0, Vec::len);
        let want = if r["trust"] == "trusted" {
            CHEAP_TRUSTED_PAIRS
        } else {
            CHEAP_PERF_PAIRS
        };
        assert_eq!(pairs, want, "{case}");
        if r["trust"] == "trusted" {
            // Where the evaluator stopped taking pairs (arena_trusted/stopping.py) reaches the
            // result: one pair a session, here every one of the few it may take.
            let stop = &case["stop"];
            assert_eq!(stop["sessions"].as_u64(), Some(want as u64), "{case}");
            assert!(
                matches!(stop["reason"].as_str(), Some("narrow" | "cap")),
                "{case}"
            );
            assert_eq!(
                case["pair_sessions"].as_array().map(Vec::len),
                Some(want),
                "{case}"
            );
        }
    }
    let run: Value =
        serde_json::from_slice(&std::fs::read(tmp.join("optimize/run.json")).unwrap()).unwrap();
    assert_eq!(
        (
            run["trusted_pairs"].as_u64(),
            run["perf_pairs"].as_u64(),
            run["checked_calls"].as_u64()
        ),
        (Some(3), Some(2), Some(0))
    );

    // An agent that breaks correctness: compiles, not correct → 20.
    let report = d.run("ci/agents/break.toml", &tmp.join("break"));
    for t in report["report"]["tasks"].as_array().unwrap() {
        assert_eq!(t["compiled"], true, "{t}");
        assert_eq!(t["correct"], false, "{t}");
        assert_eq!(t["score"].as_f64().unwrap(), 20.0, "{t}");
    }

    // An agent that rewrites scripts/task_runner.py to pass everything with 1 ns timings: the
    // evaluator uses the image's harness, so its edit changes nothing.
    d.run("ci/agents/cheat.toml", &tmp.join("cheat"));
    for r in results(&tmp.join("cheat")) {
        let ws = tmp
            .join("cheat/tasks")
            .join(r["task_id"].as_str().unwrap().replace('/', "__"))
            .join("r0/workspace.kept/scripts/task_runner.py");
        assert!(
            std::fs::read_to_string(ws)
                .unwrap()
                .contains("print(\"PASS\")"),
            "the agent did not tamper"
        );
        for gate in ["compile", "correctness"] {
            assert_eq!(
                r["candidate"][gate]["status"], r["baseline"][gate]["status"],
                "{gate}: {r}"
            );
        }
        let ids = |e: &Value| -> Vec<String> {
            e["performance"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["test_case_id"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(ids(&r["candidate"]), ids(&r["baseline"]));
        for c in r["candidate"]["performance"].as_array().unwrap() {
            assert!(
                c["execution_time_ms"].as_f64().unwrap() > 1e-3,
                "fake timing got through: {c}"
            );
        }
        // The real harness measured the same kernel: no speedup to speak of (by the tier's
        // bars, common::tier).
        let s = score(&r).speedup;
        assert!(
            common::tier::result_reads_untouched(s, &r),
            "speedup {s} from an untouched kernel: {r}"
        );
    }

    // A lockfile whose pinned manifest differs from the image: refused before anything runs,
    // naming the task, the expected and the found digest.
    let lock = std::fs::read_to_string(repo().join("lockfiles/cpu.lock")).unwrap();
    let parsed = arena_image::Lockfile::load(&repo().join("lockfiles/cpu.lock")).unwrap();
    let real = parsed
        .task_image("python2python/arena/prefix_sum")
        .unwrap()
        .manifest
        .to_string();
    let real = real.as_str();
    let fake = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    let drifted = tmp.join("drifted.lock");
    let sets = repo().join("images/sets.toml");
    std::fs::write(
        &drifted,
        lock.replace(real, fake).replace(
            "sets = \"../images/sets.toml\"",
            &format!("sets = \"{}\"", sets.display()),
        ),
    )
    .unwrap();
    let mut args = d.run_args("ci/agents/optimize.toml", &tmp.join("drift"));
    args[2] = drifted.display().to_string();
    let o = arenactl().args(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("python2python/arena/prefix_sum") && err.contains(fake) && err.contains(real),
        "{err}"
    );
    assert!(
        !tmp.join("drift/run.json").exists(),
        "a refused run must not start"
    );

    assert!(
        empty(&d.leftovers()),
        "containers, snapshots or leases leaked"
    );
}

/// A file system mounted for one test, unmounted when it ends (passed or not), before its
/// directory is removed.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// The run directory's file system fills up inside a task run (ENOSPC, a 160 KiB
/// tmpfs, less than the evaluator's files it copies there): the run fails with the error
/// named, nothing it wrote is half written (every result there parses), and it leaves no
/// container, snapshot or lease. Once there is room, the same command completes the run.
#[test]
fn a_full_run_directory_fails_cleanly_and_the_same_command_completes_the_run() {
    let d = Daemon::start();
    let small = d.dir.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    let mount = |opts: &str| {
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(&small)
            .output()
            .unwrap();
        assert!(o.status.success(), "mount -o {opts}: {}", show(&o));
    };
    mount("size=160k");
    let _mounted = Mounted(small.clone());
    let out = small.join("run");
    let mut args = d.run_args_all("ci/agents/noop.toml", &out);
    args.extend(["--tasks", "python2python/arena/prefix_sum"].map(String::from));

    let o = arenactl().args(&args).output().unwrap();
    assert!(!o.status.success(), "a full disk passed: {}", show(&o));
    assert!(
        show(&o).contains("No space left on device"),
        "the error is not named: {}",
        show(&o)
    );
    assert!(
        show(&o).contains("prefix_sum#0] error"),
        "not a task run's failure: {}",
        show(&o)
    );
    for f in common::files_below(&out) {
        if f.extension().is_some_and(|e| e == "json") {
            let bytes = std::fs::read(&f).unwrap();
            serde_json::from_slice::<Value>(&bytes)
                .unwrap_or_else(|e| panic!("{} is half written: {e}", f.display()));
        }
    }
    assert!(empty(&d.leftovers()), "{}", d.leftovers());

    mount("remount,size=64m");
    let o = arenactl().args(&args).arg("--json").output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["finished"], 1, "{report}");
    let rs = results(&out);
    assert_eq!(rs.len(), 1);
    assert!(score(&rs[0]).correct, "{}", rs[0]);
    assert!(empty(&d.leftovers()), "{}", d.leftovers());
}

#[test]
fn killed_runner_resumes_without_repeating_finished_tasks() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let agent = tmp.join("slow.toml");
    std::fs::write(
        &agent,
        "name = \"slow\"\ncommand = [\"sh\", \"-c\", \"sleep 1\"]\ntimeout_s = 60\n",
    )
    .unwrap();
    let out = tmp.join("run");
    let mut args = d.run_args(agent.to_str().unwrap(), &out);
    args.extend(["--runs".to_string(), "2".to_string()]);
    // Killed, it cannot remove its temporary directories (its runner's socket, its
    // containers' FIFOs): they go in this test's directory, not the machine's /tmp.
    let scratch = tmp.join("tmpdir");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut child = arenactl()
        .args(&args)
        .env("TMPDIR", &scratch)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it (SIGKILL: no clean-up of its own) once the first task run has finished.
    let t0 = Instant::now();
    let first = loop {
        let done: Vec<PathBuf> = glob_results(&out);
        if let Some(p) = done.first() {
            break p.clone();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no task run finished"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let first_bytes = std::fs::read(&first).unwrap();
    let finished_before = glob_results(&out).len();
    assert!(
        finished_before < 4,
        "the run finished before it could be killed"
    );

    // The same command again: the run completes, finished task runs are kept as they were.
    let o = arenactl().args(&args).arg("--json").output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["finished"], 4);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        first_bytes,
        "a finished task run was repeated"
    );
    let rs = results(&out);
    let keys = task_runs(&rs);
    assert_eq!(rs.len(), 4);
    assert_eq!(keys.len(), 4, "a task run was counted twice");
    let left = d.leftovers();
    assert!(
        empty(&left),
        "the killed runner's containers were not cleaned: {left}"
    );
}

/// An agent that changes nothing, on every CPU sample task: each kernel is timed against
/// itself in pairs (arena's trusted evaluator for matmul and prefix_sum, the paired
/// self-reported runs for sum_squares), so its speedup's interval holds 1.0. The report's
/// interval is 95%, which misses the truth one run in twenty by construction; the timing
/// tier (ci/test-timing.sh) checks a 99.8% interval at the default timing (ten rounds for
/// sum_squares: their range; the bootstrap's 99.9% for the others). What it catches is a bias
/// of the method (the unpaired self-reported path measured this kernel at 0.54–0.59 of itself
/// on a busy machine). On every push the run is cheap and its speedup held to the generous bar.
#[test]
fn an_untouched_kernel_is_measured_as_itself_on_every_sample_task() {
    let d = Daemon::start();
    let out = d.dir.path().join("noop");
    // The default timing, and the interval judged, in the timing tier only (common::tier):
    // on every push the cheap timing, and what the run records of its time checked.
    let timing = common::tier::timing();
    let mut args = if timing {
        let mut a = d.run_args_timed("ci/agents/noop.toml", &out);
        a.extend(["--perf-pairs".into(), "10".into()]);
        a
    } else {
        d.run_args_all("ci/agents/noop.toml", &out)
    };
    args.push("--json".into());
    let o = arenactl().args(&args).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["state"], "done");
    let rs = results(&out);
    assert_eq!(rs.len(), 3);
    for r in &rs {
        let task = r["task_id"].as_str().unwrap();
        let parsed = arena_run::result::parse_result(r.clone()).unwrap();
        let s = score(r);
        assert!(s.correct, "{task}: {r}");
        let cases = &parsed.candidate.performance;
        assert!(
            cases.iter().all(|c| c.pairing.pairs_ms.is_some()),
            "{task}: every case paired: {r}"
        );
        if timing {
            // The defaults: 10 pairs of each (trusted evaluator or self-reported rounds).
            assert!(
                cases
                    .iter()
                    .all(|c| c.pairing.pairs_ms.as_ref().map(Vec::len) == Some(10)),
                "{task}: {r}"
            );
            let (lo, hi) = arena_report::stats::speedup_interval_at(cases, 0.998).unwrap();
            assert!(
                lo <= 1.0 && 1.0 <= hi,
                "{task}: speedup {} with 99.8% interval {lo:.3}–{hi:.3} excludes 1.0",
                s.speedup
            );
        } else {
            assert!(
                common::tier::result_reads_untouched(s.speedup, r),
                "{task}: {r}"
            );
        }
        // A trusted evaluator's time outside its gates is named in the breakdown, and is part
        // of the evaluator containers' run time; a self-reported task has none.
        let b = &r["timings"]["breakdown"];
        let setup = b["evaluator_setup_s"].as_f64().unwrap();
        if r["trust"] == "trusted" {
            let evaluating: f64 = ["baseline", "candidate"]
                .iter()
                .map(|c| r["containers"][c]["run_s"].as_f64().unwrap())
                .sum();
            assert!(
                setup > 0.0 && setup < evaluating,
                "{task}: {b} against {evaluating} s"
            );
            // Its performance gates by part: every part named, together the gates' time
            // (to the ms each part is rounded to), the timed work inside the windows.
            let parts = b["performance_parts_s"].as_object().unwrap();
            let names: Vec<&str> = parts.keys().map(String::as_str).collect();
            let mut want = arena_eval::evaluator_record::PERFORMANCE_PARTS.to_vec();
            want.sort_unstable();
            assert_eq!(names, want, "{task}: {b}");
            let sum: f64 = parts.values().map(|v| v.as_f64().unwrap()).sum();
            let gates = b["performance_s"].as_f64().unwrap();
            assert!(
                (sum - gates).abs() < 0.05,
                "{task}: {sum} s in parts, {gates} s in gates: {b}"
            );
            let measured = b["performance_measured_s"].as_f64().unwrap();
            assert!(
                measured > 0.0 && measured < parts["window"].as_f64().unwrap(),
                "{task}: {b}"
            );
        } else {
            assert_eq!(setup, 0.0, "{task}: {b}");
            assert!(b.get("performance_parts_s").is_none(), "{task}: {b}");
        }
        eprintln!(
            "{task}: speedup {:.3}, 95% {:?}",
            s.speedup,
            arena_report::stats::speedup_interval(cases)
        );
    }
    assert!(empty(&d.leftovers()));
}
