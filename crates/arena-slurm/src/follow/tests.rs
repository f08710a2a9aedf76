//! The follow loop against a Slurm double whose jobs follow scripts of states.

use super::*;
use std::sync::Mutex;

#[test]
fn polls_back_off_while_nothing_changes_and_return_after_a_change() {
    let ms = Duration::from_millis;
    let mut b = Backoff::new(ms(250), ms(5000));
    let waits: Vec<u128> = (0..7).map(|_| b.next(false).as_millis()).collect();
    assert_eq!(waits, [500, 1000, 2000, 4000, 5000, 5000, 5000]);
    assert_eq!(b.next(true), ms(250));
    assert_eq!(Backoff::new(ms(10), ms(1)).next(false), ms(10));
}

/// A submitted fake job: id, name, the states still to show, its task run.
type FakeJob = (String, String, Vec<&'static str>, Item);

/// A Slurm double: each submitted job follows a script of states, one per poll; a job
/// whose script ends in COMPLETED writes its task run's result before it ends.
struct FakeSlurm {
    rundir: RunDir,
    scripts: Mutex<Vec<Vec<&'static str>>>,
    jobs: Mutex<Vec<FakeJob>>,
    cancelled: Mutex<Vec<String>>,
}

fn result_json(item: &Item) -> String {
    format!(
        r#"{{"task_id":"{}","task_type":"python2python","repeat":{},
        "baseline":{{"compile":{{"status":"ok"}},"correctness":{{"status":"ok"}},"performance":[]}},
        "candidate":{{"compile":{{"status":"ok"}},"correctness":{{"status":"ok"}},"performance":[]}}}}"#,
        item.task_id, item.repeat
    )
}

impl SlurmCli for FakeSlurm {
    fn submit(&self, args: &[String], _script: &str) -> Result<String> {
        let mut jobs = self.jobs.lock().unwrap();
        let id = (jobs.len() + 100).to_string();
        let name = args[1].strip_prefix("--job-name=").unwrap().to_string();
        let (_, item) = parse_job_name(&name).unwrap();
        let script = self.scripts.lock().unwrap().remove(0);
        jobs.push((id.clone(), name, script, item));
        Ok(id)
    }
    fn jobs(&self) -> Result<Vec<JobInfo>> {
        let mut out = Vec::new();
        for (id, name, script, item) in self.jobs.lock().unwrap().iter_mut() {
            let state = if script.len() > 1 {
                script.remove(0)
            } else {
                script[0]
            };
            // RESULT: the job has written its result and is still running.
            if state == "COMPLETED" || state == "RESULT" {
                let p = self.rundir.result_path(item);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, result_json(item)).unwrap();
            }
            let state = if state == "RESULT" { "RUNNING" } else { state };
            out.push(JobInfo {
                id: id.clone(),
                name: name.clone(),
                state: JobState::parse(state),
                reason: "None".into(),
            });
        }
        Ok(out)
    }
    fn cancel(&self, ids: &[String]) -> Result<()> {
        self.cancelled.lock().unwrap().extend(ids.iter().cloned());
        Ok(())
    }
}

fn backend(
    dir: &std::path::Path,
    scripts: Vec<Vec<&'static str>>,
    retries: u32,
) -> Backend<FakeSlurm> {
    let rundir = RunDir::new(dir).unwrap();
    Backend {
        slurm: FakeSlurm {
            rundir: rundir.clone(),
            scripts: Mutex::new(scripts),
            jobs: Mutex::new(Vec::new()),
            cancelled: Mutex::new(Vec::new()),
        },
        spec: JobSpec {
            command: vec!["arenactl".into()],
            partition: None,
            sbatch_args: Vec::new(),
            time_limit_min: 10,
            log_dir: dir.join("slurm"),
        },
        rundir,
        run_id: "rtest".into(),
        items: vec![
            Item {
                task_id: "a/b/one".into(),
                repeat: 0,
            },
            Item {
                task_id: "a/b/two".into(),
                repeat: 0,
            },
        ],
        retries,
        poll: Duration::from_millis(1),
        max_poll: Duration::from_millis(4),
    }
}

#[test]
fn a_job_that_dies_is_recorded_and_retried_and_counted_once() {
    let d = tempfile::tempdir().unwrap();
    let b = backend(
        d.path(),
        vec![
            vec!["PENDING", "RUNNING", "COMPLETED"],
            vec!["RUNNING", "CANCELLED"],
            vec!["RUNNING", "COMPLETED"],
        ],
        1,
    );
    let mut events = Vec::new();
    let s = b
        .run(&mut |e| events.push(e), &AtomicBool::new(false))
        .unwrap();
    assert_eq!(s.finished, 2);
    assert_eq!(s.jobs_submitted, 3);
    assert!(s.failed.is_empty());
    let ledger = Ledger::open(d.path(), "rtest");
    let two = ledger.of(&b.items[1]);
    assert_eq!(two.len(), 2);
    assert_eq!(two[0].state.as_deref(), Some("CANCELLED"));
    assert!(two[0]
        .failure
        .as_deref()
        .unwrap()
        .contains("ended CANCELLED"));
    assert_eq!(two[1].state.as_deref(), Some("COMPLETED"));
    let results = events
        .iter()
        .filter(|e| e.kind == EventKind::TaskResult as i32)
        .count();
    assert_eq!(results, 2);
    assert!(events
        .iter()
        .any(|e| e.kind == EventKind::TaskResumed as i32));

    // A head started again submits nothing: both have results.
    let again = backend(d.path(), vec![], 1);
    let s = again.run(&mut |_| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!((s.finished, s.jobs_submitted), (2, 0));
}

#[test]
fn a_job_seen_running_after_its_result_gets_its_final_state() {
    let d = tempfile::tempdir().unwrap();
    let b = backend(
        d.path(),
        vec![vec!["RESULT", "RUNNING", "COMPLETED"], vec!["COMPLETED"]],
        0,
    );
    let s = b.run(&mut |_| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!((s.finished, s.jobs_submitted), (2, 2));
    let ledger = Ledger::open(d.path(), "rtest");
    let states: Vec<Option<&str>> = ledger.jobs.iter().map(|j| j.state.as_deref()).collect();
    assert_eq!(states, [Some("COMPLETED"), Some("COMPLETED")]);
}

#[test]
fn retries_run_out_and_the_reason_is_kept() {
    let d = tempfile::tempdir().unwrap();
    let b = backend(d.path(), vec![vec!["COMPLETED"], vec!["TIMEOUT"]], 0);
    let s = b.run(&mut |_| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(s.finished, 1);
    assert_eq!(s.failed.len(), 1);
    assert!(s.failed[0].1.contains("TIMEOUT"), "{:?}", s.failed);
}

#[test]
fn cancel_scancels_the_live_jobs() {
    let d = tempfile::tempdir().unwrap();
    let b = backend(d.path(), vec![vec!["RUNNING"], vec!["RUNNING"]], 0);
    let flag = AtomicBool::new(false);
    let mut n = 0;
    let s = b
        .run(
            &mut |_| {
                n += 1;
                if n == 2 {
                    flag.store(true, Ordering::SeqCst);
                }
            },
            &flag,
        )
        .unwrap();
    assert!(s.cancelled);
    assert_eq!(*b.slurm.cancelled.lock().unwrap(), ["100", "101"]);
}

#[test]
fn live_jobs_of_this_run_are_found_by_name() {
    let jobs = vec![
        JobInfo {
            id: "7".into(),
            name: "arena.rtest.a/b/one.r0".into(),
            state: JobState::Running,
            reason: "None".into(),
        },
        JobInfo {
            id: "8".into(),
            name: "arena.rtest.a/b/two.r0".into(),
            state: JobState::Completed,
            reason: "None".into(),
        },
        JobInfo {
            id: "9".into(),
            name: "arena.rother.a/b/one.r0".into(),
            state: JobState::Running,
            reason: "None".into(),
        },
    ];
    let live = live_jobs(&jobs, "rtest");
    assert_eq!(live.len(), 1);
    assert_eq!(live.values().next().unwrap().id, "7");
}
