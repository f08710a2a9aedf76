//! The head of a Slurm run (`arenactl run --backend slurm`): everything that can be checked
//! without a node's container engine is checked here, before any job exists (lockfile, task
//! digests, agent, hidden set), the run is recorded, and the jobs' command line and limits are
//! made; each job checks the images on its own node. And `arenactl cancel RUN_DIR`: the mark
//! that stops the head from retrying, then scancel of every live job of the run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use arena_eval::GateTimeouts;
use arena_run::plan::{plan, Plan, RunRequest};
use arena_run::rundir::write_json;
use arena_run::{Item, RunDir};

use crate::commands::{JobInfo, SlurmCli, SlurmCommands};
use crate::error::{Result, SlurmError};
use crate::follow::{cancel_marker, live_jobs, Backend};
use crate::job::JobSpec;

/// squeue is asked this often while jobs change state, and at most this seldom otherwise.
pub const POLL: Duration = Duration::from_millis(250);
pub const MAX_POLL: Duration = Duration::from_secs(5);

/// What the head needs besides the run request: how each job calls arenactl on its node.
#[derive(Debug, Clone)]
pub struct HeadRequest {
    pub run: RunRequest,
    pub agents_dir: PathBuf,
    /// arenactl's own path (the jobs run `arenactl runner exec`).
    pub exe: PathBuf,
    pub containerd_socket: PathBuf,
    pub namespace: String,
    pub store: PathBuf,
    pub partition: Option<String>,
    pub sbatch_args: Vec<String>,
    pub retries: u32,
    /// A bundle each job fills its node's store from when it lacks a locked blob.
    pub bundle: Option<PathBuf>,
}

/// A checked, recorded run and the follow loop that carries it out.
pub struct Head {
    pub plan: Plan,
    pub backend: Backend<SlurmCommands>,
}

/// Checks and records the run and makes its jobs' spec.
pub fn prepare(req: &HeadRequest) -> Result<Head> {
    let plan = plan(&req.run, std::slice::from_ref(&req.agents_dir))?;
    write_json(&plan.rundir.record_path(), &plan.record)?;
    let mut command: Vec<String> = vec![
        req.exe.display().to_string(),
        "runner".into(),
        "exec".into(),
        "--run-dir".into(),
        plan.rundir.root.display().to_string(),
        "--agent".into(),
        plan.agent.file.display().to_string(),
        "--gpus".into(),
        "slurm".into(),
        "--containerd".into(),
        req.containerd_socket.display().to_string(),
        "--namespace".into(),
        req.namespace.clone(),
        "--store".into(),
        req.store.display().to_string(),
        "--agents-dir".into(),
        req.agents_dir.display().to_string(),
    ];
    if let Some(h) = &req.run.hidden_set {
        command.extend(["--unseen".into(), h.display().to_string()]);
    }
    if let Some(b) = &req.bundle {
        if !b.is_file() {
            return Err(SlurmError::io(
                b,
                std::io::Error::new(std::io::ErrorKind::NotFound, "--bundle: no such file"),
            ));
        }
        command.extend(["--bundle".into(), b.display().to_string()]);
    }
    let evaluation_s = plan
        .tasks
        .values()
        .map(|t| GateTimeouts::for_task(&t.config).total())
        .max()
        .unwrap_or(0);
    let backend = Backend {
        slurm: SlurmCommands,
        spec: JobSpec {
            command,
            partition: req.partition.clone(),
            sbatch_args: req.sbatch_args.clone(),
            time_limit_min: JobSpec::time_limit(
                plan.agent.timeout_s,
                evaluation_s,
                plan.hidden.is_some(),
            ),
            log_dir: plan.rundir.root.join("slurm"),
        },
        rundir: plan.rundir.clone(),
        run_id: plan.record.run_id.clone(),
        items: plan.items(),
        retries: req.retries,
        poll: POLL,
        max_poll: MAX_POLL,
    };
    Ok(Head { plan, backend })
}

/// `arenactl cancel RUN_DIR`: marks the run cancelled (a head following it stops instead of
/// retrying) and scancels every live job of it. Returns the run id and the jobs cancelled.
pub fn cancel_run(
    run_dir: &std::path::Path,
    slurm: &dyn SlurmCli,
) -> Result<(String, BTreeMap<Item, JobInfo>)> {
    let rundir = RunDir::new(run_dir)?;
    let record = rundir.load_record()?.ok_or_else(|| {
        SlurmError::io(
            rundir.record_path(),
            std::io::Error::new(std::io::ErrorKind::NotFound, "missing: not a run directory"),
        )
    })?;
    let marker = cancel_marker(&rundir.root);
    if let Some(parent) = marker.parent() {
        std::fs::create_dir_all(parent).map_err(|e| SlurmError::io(parent, e))?;
    }
    std::fs::write(&marker, b"").map_err(|e| SlurmError::io(&marker, e))?;
    let live = live_jobs(&slurm.jobs()?, &record.run_id);
    let ids: Vec<String> = live.values().map(|j| j.id.clone()).collect();
    slurm.cancel(&ids)?;
    Ok((record.run_id, live))
}
