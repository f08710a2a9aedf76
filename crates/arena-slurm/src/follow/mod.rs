//! The head's loop: submit a job for every task run that has neither a result nor a live job,
//! follow the jobs (one squeue per poll) and the result files, and when a job ends without a
//! result, record Slurm's state and reason and submit it again, up to `retries` times. Results
//! are read from the shared run directory, so a task run is counted once however many jobs
//! it took. Progress goes out as the runner's events, so the client shows it the same way.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arena_proto::v1::{EventKind, RunEvent};
use arena_run::{Item, RunDir};

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
    /// squeue is asked every `poll` while something changes, and less often (doubling up
    /// to `max_poll`) while nothing does.
    pub poll: Duration,
    pub max_poll: Duration,
}

/// The wait between two squeue calls: back to the minimum after a change, doubled (up to the
/// maximum) after a poll that saw none — a long job is not asked about four times a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    now: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max: max.max(min),
            now: min,
        }
    }

    pub fn current(&self) -> Duration {
        self.now
    }

    /// The next wait, after a poll that did (`changed`) or did not see a change.
    pub fn next(&mut self, changed: bool) -> Duration {
        self.now = if changed {
            self.min
        } else {
            (self.now * 2).min(self.max)
        };
        self.now
    }
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
            ev.gpu = r.gpu.as_ref().map(|g| g.index as i32).unwrap_or(-1);
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
        let mut backoff = Backoff::new(self.poll, self.max_poll);
        let mut changed = true;
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
            std::thread::sleep(backoff.next(changed));
            changed = false;
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
                    changed = true;
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
                            changed = true;
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
                        changed = true;
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
mod tests;
