//! From a request to a checked plan: the lockfile, the selected tasks (each tree against its
//! locked digest), the agent file, the sealed hidden set and the run directory with its
//! record — everything that can be checked without a container engine. The local runner and
//! the Slurm head both start from a [`Plan`]; work on an existing run starts from
//! [`Recorded`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arena_image::Lockfile;
use arena_task::Task;

use crate::agent::{Agent, AgentImage};
use crate::error::{Result, RunError};
use crate::hidden::HiddenSet;
use crate::rundir::{Item, RunDir, RunRecord};

/// What a client asks for.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub image_lock: PathBuf,
    pub tasks: Vec<String>,
    pub agent: String,
    pub runs: u32,
    pub run_dir: PathBuf,
    pub hidden_set: Option<PathBuf>,
    /// Memory of each container of a task that sets no `memory_limit` (default 16 GiB).
    pub memory: Option<u64>,
    /// Rounds of paired performance runs for self-reported harnesses (default 6; 0: the
    /// candidate timed alone, against the baseline evaluation, as AgentKernelArena does).
    pub perf_pairs: Option<u32>,
    /// Most pairs of timed batches per configuration in arena's trusted evaluator (default
    /// [`arena_eval::trusted::PerfSettings`]' 10), one per session of fresh kernel processes,
    /// stopping once the interval is narrow (`stop_width`) but not before 10 sessions on the
    /// CPU or 5 on a GPU. Fewer: a cheaper, noisier measurement whose interval says so (smoke
    /// runs, CI).
    pub trusted_pairs: Option<u32>,
    /// Outputs of each timed batch the trusted evaluator checks on a GPU, a secret sample
    /// (default [`arena_eval::trusted::PerfSettings`]' 64; 0: every one).
    pub checked_calls: Option<u32>,
    /// The values of the agent's `secrets` (its API keys), held for the run and never
    /// recorded: a resumed run is given them again.
    pub secrets: crate::secrets::Secrets,
    /// Only the original kernel on each configuration of the hidden set, no baseline and no
    /// agent: the probe of a set before it is sealed. `agent` is ignored.
    pub probe: bool,
}

/// The agent a probe's record names: none runs.
pub const PROBE_AGENT: &str = "probe (the original kernel only)";

/// `*`, an exact id, or a prefix ending in `/`.
pub fn select(selectors: &[String], ids: &[String]) -> Result<Vec<String>> {
    if selectors.is_empty() {
        return Ok(ids.to_vec());
    }
    let mut out = Vec::new();
    for s in selectors {
        let hits: Vec<&String> = ids
            .iter()
            .filter(|id| s == "*" || *id == s || (s.ends_with('/') && id.starts_with(s.as_str())))
            .collect();
        if hits.is_empty() {
            return Err(RunError::invalid(
                "--tasks",
                s,
                "selects no task of the lockfile (an id, a prefix ending in /, or *)",
            ));
        }
        out.extend(hits.into_iter().cloned());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Loads the locked tasks of the selection and checks their trees against the lock.
pub fn load_tasks(
    lock_path: &Path,
    lock: &Lockfile,
    selectors: &[String],
) -> Result<BTreeMap<String, Task>> {
    let sets_path = lock.sets_path(lock_path);
    let sets = arena_image::lock::load_sets(&sets_path)?;
    let set = sets.iter().find(|s| s.name == lock.set).ok_or_else(|| {
        RunError::invalid(
            sets_path.display(),
            "set",
            format!("no set named {}", lock.set),
        )
    })?;
    let root = sets_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(&set.tasks);
    let ids: Vec<String> = lock.images.iter().filter_map(|r| r.task.clone()).collect();
    let mut tasks = BTreeMap::new();
    for id in select(selectors, &ids)? {
        let task = Task::load(&root.join(&id), &id)?;
        check_locked_tree(lock, lock_path, &task)?;
        tasks.insert(task.id.to_string(), task);
    }
    Ok(tasks)
}

/// The one check that a task's tree is the one `lock` was made from: the task is in the
/// lockfile, and its tree's digest is the one locked (runs, and `unseen generate --probe`,
/// which runs the task's locked image).
pub fn check_locked_tree(lock: &Lockfile, lock_path: &Path, task: &Task) -> Result<()> {
    let id = task.id.as_str();
    let rec = lock.task_image(id).ok_or_else(|| {
        RunError::Other(format!("{id}: not in the lockfile {}", lock_path.display()))
    })?;
    let found = arena_task::task_digest(&task.dir)?.to_string();
    let expected = rec.task_digest.clone().unwrap_or_default();
    if found != expected {
        return Err(RunError::Drift {
            task: id.to_string(),
            what: format!("task tree {}", task.dir.display()),
            expected,
            found,
        });
    }
    Ok(())
}

/// A run checked and recorded as far as it can be without a container engine: its lockfile,
/// its tasks (each tree against its locked digest), its agent, its hidden set, its directory
/// and record. What runs it (the local engine, or Slurm jobs on other nodes) checks the images.
pub struct Plan {
    pub lock: Lockfile,
    pub lock_path: PathBuf,
    pub tasks: BTreeMap<String, Task>,
    pub agent: Agent,
    pub hidden: Option<HiddenSet>,
    pub rundir: RunDir,
    pub record: RunRecord,
}

impl Plan {
    /// Every (task, repeat) of the run, in order.
    pub fn items(&self) -> Vec<Item> {
        items_of(self.tasks.keys(), self.record.runs)
    }
}

/// Every (task, repeat) of `ids`, in order.
pub fn items_of<'a>(ids: impl Iterator<Item = &'a String>, runs: u32) -> Vec<Item> {
    let mut items = Vec::new();
    for id in ids {
        for repeat in 0..runs {
            items.push(Item {
                task_id: id.clone(),
                repeat,
            });
        }
    }
    items
}

/// The most repeats of each task one run may ask for: a request is any runner client's, and
/// every (task, repeat) of a run is listed in memory before it starts (4 billion repeats
/// would take the runner down for every client; arena-runner's request_properties).
pub const MAX_RUNS: u32 = 1000;
/// The most rounds of paired performance runs a request may ask of a self-reported harness
/// (each round runs both kernels' performance command).
pub const MAX_PERF_PAIRS: u32 = 100;
/// The most pairs of timed batches a request may ask of the trusted evaluator per
/// configuration (at least one: a time is a pair's).
pub const MAX_TRUSTED_PAIRS: u32 = 100;

/// The most outputs a request may ask the trusted evaluator to check per timed batch: a
/// batch's most calls (PerfSettings' `max_calls`, which a test holds it to); as many checks
/// every one.
pub const MAX_CHECKED_CALLS: u32 = 4096;

/// Refuses what a run or an Evaluate request asks of the trusted evaluator's timing out of
/// bounds: trusted pairs outside 1 to [`MAX_TRUSTED_PAIRS`], checked calls over
/// [`MAX_CHECKED_CALLS`].
pub fn check_trusted_timing(pairs: Option<u32>, checked_calls: Option<u32>) -> Result<()> {
    let out = |field, bounds: &str, n| {
        Err(RunError::invalid(
            "request",
            field,
            format!("must be {bounds}, not {n}"),
        ))
    };
    match (pairs, checked_calls) {
        (Some(p), _) if p == 0 || p > MAX_TRUSTED_PAIRS => {
            out("trusted_pairs", &format!("1 to {MAX_TRUSTED_PAIRS}"), p)
        }
        (_, Some(n)) if n > MAX_CHECKED_CALLS => out(
            "checked_calls",
            &format!("0 (every output) to {MAX_CHECKED_CALLS}"),
            n,
        ),
        _ => Ok(()),
    }
}

/// Checks a request and computes its record; refuses a directory holding another run. A
/// directory holding this run keeps its run id (a resume).
pub fn plan(req: &RunRequest, agent_dirs: &[PathBuf]) -> Result<Plan> {
    if req.runs == 0 || req.runs > MAX_RUNS {
        return Err(RunError::invalid(
            "request",
            "runs",
            format!("must be 1 to {MAX_RUNS}, not {}", req.runs),
        ));
    }
    if req.perf_pairs.is_some_and(|p| p > MAX_PERF_PAIRS) {
        return Err(RunError::invalid(
            "request",
            "perf_pairs",
            format!("must be at most {MAX_PERF_PAIRS}"),
        ));
    }
    check_trusted_timing(req.trusted_pairs, req.checked_calls)?;
    if req.image_lock.is_dir() {
        return Err(RunError::invalid(
            "request",
            "image_lock",
            format!("{}: a directory, not a lockfile", req.image_lock.display()),
        ));
    }
    let lock = Lockfile::load(&req.image_lock)?;
    let lock_digest = arena_image::Digest::of_file(&req.image_lock)
        .map_err(|e| RunError::io(&req.image_lock, e))?
        .0
        .to_string();
    let tasks = load_tasks(&req.image_lock, &lock, &req.tasks)?;
    let agent = if req.probe {
        Agent::recorded(PROBE_AGENT, PROBE_AGENT)
    } else {
        Agent::resolve(&req.agent, agent_dirs)?
    };
    if !req.probe {
        req.secrets
            .check_for(&agent.name, &agent.file, &agent.secrets)?;
    }
    if let AgentImage::Locked(name) = &agent.image {
        if !lock.images.iter().any(|r| &r.name == name) {
            return Err(RunError::invalid(
                agent.file.display(),
                "image",
                format!(
                    "lock:{name} is not an image of {}",
                    req.image_lock.display()
                ),
            ));
        }
    }
    // A sealed set is checked file by file against its manifest before it is used.
    let hidden = req.hidden_set.as_deref().map(HiddenSet::load).transpose()?;
    if req.probe {
        let Some(h) = &hidden else {
            return Err(RunError::invalid(
                "request",
                "hidden_set",
                "a probe needs the set it probes",
            ));
        };
        if let Some(id) = tasks.keys().find(|id| !h.files.contains_key(*id)) {
            return Err(RunError::invalid(
                h.dir.display(),
                "files",
                format!("{id}: selected for a probe, but the set has no configurations for it"),
            ));
        }
    }
    if let (Some(h), Some(dir)) = (&hidden, &req.hidden_set) {
        if !tasks.keys().any(|id| h.files.contains_key(id)) {
            let theirs: Vec<&String> = h.files.keys().take(3).collect();
            return Err(RunError::invalid(
                dir.display(),
                "files",
                format!(
                    "the hidden set covers none of the selected tasks (its task ids: {theirs:?}…); \
                     generate it from the tasks root the lockfile uses"
                ),
            ));
        }
    }
    let rundir = RunDir::new(&req.run_dir)?;
    let image_lock = req
        .image_lock
        .canonicalize()
        .map_err(|e| RunError::io(&req.image_lock, e))?;
    let mut record = RunRecord::new(
        &image_lock,
        lock_digest,
        &agent,
        tasks.keys().cloned().collect(),
        req.runs,
        hidden.as_ref().map(|h| h.digest.clone()),
    );
    record.memory_bytes = req.memory;
    record.perf_pairs = req.perf_pairs;
    record.trusted_pairs = req.trusted_pairs;
    record.checked_calls = req.checked_calls;
    if let Some(old) = rundir.load_record()? {
        if let Some(field) = old.first_difference(&record) {
            return Err(RunError::invalid(
                rundir.record_path().display(),
                field,
                "this run directory holds a different run; use another --out, or repeat the original request to resume it",
            ));
        }
        record.run_id = old.run_id;
        record.owner = old.owner;
    }
    Ok(Plan {
        lock,
        lock_path: image_lock,
        tasks,
        agent,
        hidden,
        rundir,
        record,
    })
}

/// A run as its directory recorded it, its lockfile checked against the recorded digest: what
/// work on an existing run (an unseen evaluation, a Slurm job's task run) starts from.
pub struct Recorded {
    pub rundir: RunDir,
    pub record: RunRecord,
    pub lock_path: PathBuf,
    pub lock: Lockfile,
}

impl Recorded {
    pub fn load(run_dir: &Path) -> Result<Recorded> {
        let rundir = RunDir::new(run_dir)?;
        let record = rundir.load_record()?.ok_or_else(|| {
            RunError::invalid(
                rundir.record_path().display(),
                "(file)",
                "missing: not a run directory (arenactl run writes it)",
            )
        })?;
        let lock_path = PathBuf::from(&record.image_lock);
        let lock = Lockfile::load(&lock_path)?;
        let lock_digest = arena_image::Digest::of_file(&lock_path)
            .map_err(|e| RunError::io(&lock_path, e))?
            .0
            .to_string();
        if lock_digest != record.lock_digest {
            return Err(RunError::Drift {
                task: record.run_id.clone(),
                what: format!("lockfile {}", lock_path.display()),
                expected: record.lock_digest.clone(),
                found: lock_digest,
            });
        }
        Ok(Recorded {
            rundir,
            record,
            lock_path,
            lock,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers a client sends are bounded before anything else is read: repeats (each listed
    /// in memory) and rounds of paired runs.
    #[test]
    fn runs_and_pairs_out_of_bounds_are_refused_naming_the_field() {
        for (runs, pairs, trusted, checked, field) in [
            (0, None, None, None, "runs"),
            (MAX_RUNS + 1, None, None, None, "runs"),
            (u32::MAX, None, None, None, "runs"),
            (1, Some(MAX_PERF_PAIRS + 1), None, None, "perf_pairs"),
            (1, None, Some(0), None, "trusted_pairs"),
            (1, None, Some(MAX_TRUSTED_PAIRS + 1), None, "trusted_pairs"),
            (1, None, None, Some(MAX_CHECKED_CALLS + 1), "checked_calls"),
            (1, None, None, Some(u32::MAX), "checked_calls"),
        ] {
            let req = RunRequest {
                runs,
                perf_pairs: pairs,
                trusted_pairs: trusted,
                checked_calls: checked,
                ..RunRequest::default()
            };
            let e = plan(&req, &[]).err().expect("refused");
            assert!(e.to_string().contains(&format!("request: {field}:")), "{e}");
        }
    }

    /// A request may ask every call of the largest batch to be checked, and no more.
    #[test]
    fn the_most_checked_calls_are_a_batchs_most_calls() {
        let max_calls = arena_eval::trusted::PerfSettings::default().max_calls;
        assert_eq!(MAX_CHECKED_CALLS, max_calls);
        let req = |n| RunRequest {
            runs: 1,
            checked_calls: Some(n),
            ..RunRequest::default()
        };
        // Refused for its number, or past it (the default request names no lockfile).
        let past = plan(&req(max_calls), &[]).err().expect("no lockfile");
        assert!(!past.to_string().contains("checked_calls"), "{past}");
        let over = plan(&req(max_calls + 1), &[]).err().expect("refused");
        assert!(
            over.to_string().contains("request: checked_calls:"),
            "{over}"
        );
    }

    /// The lock check runs and the unseen probe share: the locked tree passes, a changed copy
    /// of it is drift naming both digests, and a task the lockfile lacks names the lockfile.
    #[test]
    fn a_task_tree_is_checked_against_its_locked_digest() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let lock_path = repo.join("lockfiles/cpu.lock");
        let lock = Lockfile::load(&lock_path).unwrap();
        let id = "python2python/arena/prefix_sum";
        let task = Task::load(&repo.join("tasks").join(id), id).unwrap();
        check_locked_tree(&lock, &lock_path, &task).unwrap();

        let d = tempfile::tempdir().unwrap();
        let copy = d.path().join("prefix_sum");
        let o = std::process::Command::new("cp")
            .arg("-r")
            .arg(&task.dir)
            .arg(&copy)
            .status()
            .unwrap();
        assert!(o.success());
        std::fs::write(copy.join("config.yaml"), {
            let mut c = std::fs::read_to_string(copy.join("config.yaml")).unwrap();
            c.push_str("\n# changed\n");
            c
        })
        .unwrap();
        let changed = Task::load(&copy, id).unwrap();
        let e = check_locked_tree(&lock, &lock_path, &changed).unwrap_err();
        assert!(matches!(e, RunError::Drift { .. }), "{e}");
        let found = arena_task::task_digest(&copy).unwrap().to_string();
        assert!(e.to_string().contains(&found), "{e}");

        let other = Task::load(&copy, "python2python/arena/not_locked").unwrap();
        let e = check_locked_tree(&lock, &lock_path, &other).unwrap_err();
        assert!(e.to_string().contains("cpu.lock"), "{e}");
    }

    #[test]
    fn selectors() {
        let ids: Vec<String> = ["a/x/one", "a/x/two", "b/y/three"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(select(&[], &ids).unwrap().len(), 3);
        assert_eq!(
            select(&["a/".into()], &ids).unwrap(),
            ["a/x/one", "a/x/two"]
        );
        assert_eq!(
            select(&["b/y/three".into(), "*".into()], &ids)
                .unwrap()
                .len(),
            3
        );
        let e = select(&["c/".into()], &ids).unwrap_err().to_string();
        assert!(e.contains("--tasks: c/: selects no task"), "{e}");
    }
}
