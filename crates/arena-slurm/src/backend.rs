//! The head's loop: submit a job for every task run that has neither a result nor a live job,
//! follow the jobs (one squeue per poll) and the result files, and when a job ends without a
//! result, record Slurm's state and reason and submit it again, up to `retries` times. Results
//! are read from the shared run directory, so a task run is counted once however many jobs
//! it took. Progress goes out as the runner's events, so the client shows it the same way.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arena_proto::v1::{EventKind, RunEvent};
use arena_runner::rundir::{Item, RunDir};

use crate::commands::{JobInfo, JobState, SlurmCli};
use crate::error::Result;
use crate::job::{parse_job_name, JobSpec};
use crate::ledger::{now, Ledger};

pub struct Backend<S: SlurmCli> {
    pub slurm: S,
    pub spec: JobSpec,
    pub rundir: RunDir,
    pub run_id: String,
    pub items: Vec<Item>,
    /// Further jobs for a task run whose job died (node failure, scancel, time limit).
    pub retries: u32,
    pub poll: Duration,
}

/// How a head's follow ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub finished: u32,
    /// Task runs given up on, with the last job's reason.
    pub failed: Vec<(Item, String)>,
    pub jobs_submitted: u32,
    pub cancelled: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Slot {
    Done,
    /// Needs a job.
    Waiting,
    Live {
        job: String,
        state: JobState,
    },
    Failed(String),
}

/// `<run dir>/slurm/cancel-requested`: written by `arenactl cancel` before it scancels the
/// run's jobs, so the head stops instead of retrying them; removed when a head starts.
pub fn cancel_marker(run_dir: &std::path::Path) -> std::path::PathBuf {
    run_dir.join("slurm").join("cancel-requested")
}

/// The task runs a restarted head finds already in Slurm: live jobs of this run, by name.
pub fn live_jobs(jobs: &[JobInfo], run_id: &str) -> BTreeMap<Item, JobInfo> {
    let mut out = BTreeMap::new();
    for j in jobs {
        if let Some((r, item)) = parse_job_name(&j.name) {
            if r == run_id && j.state.is_live() {
                out.insert(item, j.clone());
            }
        }
    }
    out
}

fn tail_line(path: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
    Some(line.chars().take(300).collect())
}

impl<S: SlurmCli> Backend<S> {
    fn event(&self, seq: &mut u64, kind: EventKind, item: &Item, message: String) -> RunEvent {
        let ev = RunEvent {
            seq: *seq,
            kind: kind as i32,
            task_id: item.task_id.clone(),
            repeat: item.repeat,
            gpu: -1,
            message,
            time: now(),
            ..Default::default()
        };
        *seq += 1;
        ev
    }

    fn result_event(&self, seq: &mut u64, item: &Item, note: &str) -> RunEvent {
        let mut ev = self.event(seq, EventKind::TaskResult, item, note.to_string());
        if let Some(r) = self.rundir.load_result(item) {
            ev.passed = r.candidate.correct();
            ev.gpu = r
                .extra
                .get("gpu")
                .and_then(|g| g.get("index"))
                .and_then(|i| i.as_i64())
                .unwrap_or(-1) as i32;
            ev.result_json = serde_json::to_string(&r).unwrap_or_default();
        }
        ev
    }

    fn log_path(&self, item: &Item, job: &str) -> std::path::PathBuf {
        self.spec.log_dir.join(format!(
            "{}.r{}-{job}.log",
            item.task_id.replace('/', "__"),
            item.repeat
        ))
    }

    /// Jobs whose result arrived while they were still running: their final state, for the
    /// ledger (a few polls at most; a job that takes longer is left without one).
    fn record_final_states(&self, ledger: &mut Ledger, mut finishing: Vec<String>) -> Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !finishing.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(self.poll);
            let jobs = self.slurm.jobs()?;
            let mut still = Vec::new();
            for id in finishing {
                match jobs.iter().find(|j| j.id == id) {
                    Some(j) if j.state.is_live() => still.push(id),
                    Some(j) => ledger.ended(&id, j.state.as_str(), None)?,
                    None => ledger.ended(&id, "COMPLETED", None)?,
                }
            }
            finishing = still;
        }
        Ok(())
    }

    /// Runs the run to its end (or until `cancel` is set: then its live jobs are scancelled).
    pub fn run(&self, on_event: &mut dyn FnMut(RunEvent), cancel: &AtomicBool) -> Result<Summary> {
        std::fs::create_dir_all(&self.spec.log_dir)
            .map_err(|e| crate::error::SlurmError::io(&self.spec.log_dir, e))?;
        let marker = cancel_marker(&self.rundir.root);
        let _ = std::fs::remove_file(&marker);
        let mut ledger = Ledger::open(&self.rundir.root, &self.run_id);
        let mut seq = 0u64;
        let mut summary = Summary::default();
        let mut attempts: BTreeMap<Item, u32> = BTreeMap::new();
        let mut finishing: Vec<String> = Vec::new();
        let live = live_jobs(&self.slurm.jobs()?, &self.run_id);
        let mut slots: BTreeMap<Item, Slot> = BTreeMap::new();
        for item in &self.items {
            let slot = if self.rundir.load_result(item).is_some() {
                on_event(self.result_event(
                    &mut seq,
                    item,
                    "finished earlier in this run directory",
                ));
                summary.finished += 1;
                Slot::Done
            } else if let Some(j) = live.get(item) {
                on_event(self.event(
                    &mut seq,
                    EventKind::JobState,
                    item,
                    format!(
                        "job {} {} (submitted earlier; followed, not resubmitted)",
                        j.id,
                        j.state.as_str()
                    ),
                ));
                Slot::Live {
                    job: j.id.clone(),
                    state: j.state.clone(),
                }
            } else {
                Slot::Waiting
            };
            slots.insert(item.clone(), slot);
        }
        loop {
            if cancel.load(Ordering::SeqCst) || marker.exists() {
                let ids: Vec<String> = slots
                    .values()
                    .filter_map(|s| match s {
                        Slot::Live { job, .. } => Some(job.clone()),
                        _ => None,
                    })
                    .collect();
                self.slurm.cancel(&ids)?;
                for id in &ids {
                    ledger.ended(id, "CANCELLED", Some("the run was cancelled".into()))?;
                }
                self.record_final_states(&mut ledger, finishing)?;
                summary.cancelled = true;
                return Ok(summary);
            }
            for (item, slot) in slots.iter_mut() {
                if *slot != Slot::Waiting {
                    continue;
                }
                let id = self.slurm.submit(
                    &self.spec.sbatch_args(&self.run_id, item),
                    &self.spec.script(item),
                )?;
                ledger.submitted(item, &id)?;
                summary.jobs_submitted += 1;
                *attempts.entry(item.clone()).or_default() += 1;
                on_event(self.event(
                    &mut seq,
                    EventKind::TaskQueued,
                    item,
                    format!("slurm job {id}"),
                ));
                *slot = Slot::Live {
                    job: id,
                    state: JobState::Pending,
                };
            }
            if !slots.values().any(|s| matches!(s, Slot::Live { .. })) {
                break;
            }
            std::thread::sleep(self.poll);
            // One squeue for all; result files are read after it, so a job squeue shows as
            // ended has written whatever result it wrote.
            let jobs: BTreeMap<String, JobInfo> = self
                .slurm
                .jobs()?
                .into_iter()
                .map(|j| (j.id.clone(), j))
                .collect();
            for (item, slot) in slots.iter_mut() {
                let Slot::Live { job, state } = slot else {
                    continue;
                };
                let info = jobs.get(job.as_str());
                if self.rundir.load_result(item).is_some() {
                    match info {
                        // The result is written just before the job exits: its final state is
                        // recorded once Slurm has it.
                        Some(j) if j.state.is_live() => finishing.push(job.clone()),
                        Some(j) => ledger.ended(job, j.state.as_str(), None)?,
                        None => ledger.ended(job, "COMPLETED", None)?,
                    }
                    on_event(self.result_event(&mut seq, item, &format!("slurm job {job}")));
                    summary.finished += 1;
                    *slot = Slot::Done;
                    continue;
                }
                match info {
                    Some(j) if j.state.is_live() => {
                        if &j.state != state {
                            on_event(self.event(
                                &mut seq,
                                EventKind::JobState,
                                item,
                                format!("job {job} {}", j.state.as_str()),
                            ));
                            *state = j.state.clone();
                        }
                    }
                    ended => {
                        let (st, why) = match ended {
                            Some(j) => (j.state.as_str().to_string(), j.reason.clone()),
                            None => ("GONE".to_string(), "no longer known to Slurm".to_string()),
                        };
                        let mut failure = format!("job {job} ended {st} ({why}) without a result");
                        if let Some(l) = tail_line(&self.log_path(item, job)) {
                            failure.push_str(&format!("; its log ends: {l}"));
                        }
                        ledger.ended(job, &st, Some(failure.clone()))?;
                        let n = attempts.get(item).copied().unwrap_or(0);
                        if n <= self.retries {
                            on_event(self.event(
                                &mut seq,
                                EventKind::TaskResumed,
                                item,
                                format!(
                                    "{failure}; submitting again (retry {n} of {})",
                                    self.retries
                                ),
                            ));
                            *slot = Slot::Waiting;
                        } else {
                            on_event(self.event(
                                &mut seq,
                                EventKind::TaskError,
                                item,
                                failure.clone(),
                            ));
                            *slot = Slot::Failed(failure);
                        }
                    }
                }
            }
        }
        self.record_final_states(&mut ledger, finishing)?;
        for (item, slot) in slots {
            if let Slot::Failed(why) = slot {
                summary.failed.push((item, why));
            }
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

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
}
