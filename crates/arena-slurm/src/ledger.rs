//! `<run dir>/slurm/jobs.json`: every job the head submitted for the run — its task run, its
//! id, when it was submitted and how it ended, with Slurm's state and reason — written
//! atomically after every change, so a failure's reason survives the head.

use std::path::{Path, PathBuf};

use arena_run::rundir::{write_json, Item};
use serde::{Deserialize, Serialize};

use crate::error::Result;

pub const LEDGER_SCHEMA: &str = "arena.slurm-jobs/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub task_id: String,
    pub repeat: u32,
    pub job_id: String,
    /// Seconds since the Unix epoch.
    pub submitted: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<f64>,
    /// Slurm's final state (`COMPLETED`, `CANCELLED`, `TIMEOUT`, …) once the job ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Why it ended without a result, where it did (Slurm's reason and the log's last line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    pub schema: String,
    pub run_id: String,
    pub jobs: Vec<JobRecord>,
    #[serde(skip)]
    path: PathBuf,
}

pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Ledger {
    pub fn path_in(run_dir: &Path) -> PathBuf {
        run_dir.join("slurm").join("jobs.json")
    }

    /// The run's ledger, or a new one (also when the file holds another run's).
    pub fn open(run_dir: &Path, run_id: &str) -> Ledger {
        let path = Self::path_in(run_dir);
        let loaded = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Ledger>(&t).ok())
            .filter(|l| l.run_id == run_id);
        let mut l = loaded.unwrap_or(Ledger {
            schema: LEDGER_SCHEMA.into(),
            run_id: run_id.to_string(),
            jobs: Vec::new(),
            path: PathBuf::new(),
        });
        l.path = path;
        l
    }

    pub fn save(&self) -> Result<()> {
        write_json(&self.path, self)?;
        Ok(())
    }

    pub fn submitted(&mut self, item: &Item, job_id: &str) -> Result<()> {
        self.jobs.push(JobRecord {
            task_id: item.task_id.clone(),
            repeat: item.repeat,
            job_id: job_id.to_string(),
            submitted: now(),
            ended: None,
            state: None,
            failure: None,
        });
        self.save()
    }

    pub fn ended(&mut self, job_id: &str, state: &str, failure: Option<String>) -> Result<()> {
        if let Some(j) = self.jobs.iter_mut().find(|j| j.job_id == job_id) {
            j.ended = Some(now());
            j.state = Some(state.to_string());
            j.failure = failure;
        }
        self.save()
    }

    /// Jobs of `item`, oldest first.
    pub fn of(&self, item: &Item) -> Vec<&JobRecord> {
        self.jobs
            .iter()
            .filter(|j| j.task_id == item.task_id && j.repeat == item.repeat)
            .collect()
    }
}
