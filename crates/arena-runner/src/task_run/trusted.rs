//! The trusted evaluator container, for tasks with a trusted harness: arena's evaluator
//! (root, with only the capabilities to start and stop processes of other users) imports a
//! private copy of the harness, makes inputs from a secret seed, and times each kernel — the
//! original and the agent's, each in a process of its own user — from outside, checking every
//! output itself. The image's `/task` is hidden behind an empty file system, the root file
//! system is read-only, each kernel writes only its own sized scratch, and the reports go
//! where only the evaluator may write. See docs/trusted-evaluation.md.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use arena_eval::evaluator_record::EvaluatorRecord;
use arena_eval::layout::OUT_DIR;
use arena_eval::sources::StagedSource;
use arena_eval::trusted::{self, Job, Role, BASELINE, CANDIDATE};
use arena_eval::GateTimeouts;
use arena_runtime::{BindMount, ContainerConfig, Network, RunOutcome, Tmpfs};

use super::agent::copy_task_tree;
use super::phase::{redact_kind, ContainerPhase};
use super::{bind, TaskRun};
use crate::error::{Result, RunnerError};

/// Size of each kernel's scratch file system (its HOME, TMPDIR and compiler caches).
const SCRATCH_BYTES: u64 = 2 << 30;

/// One trusted evaluator container.
pub(crate) struct TrustedRun<'a> {
    pub phase: ContainerPhase,
    pub roles: &'a [Role],
    /// The agent's staged sources, where CANDIDATE is a role.
    pub candidate: Option<&'a [StagedSource]>,
    /// The task's hidden file, for an unseen evaluation.
    pub hidden: Option<&'a Path>,
}

/// What the evaluator left: its report directory, the container, and its own record (none
/// where it ran out of time before writing one).
pub(crate) struct TrustedOut {
    pub out: PathBuf,
    pub outcome: RunOutcome,
    pub record: Option<EvaluatorRecord>,
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> RunnerError + '_ {
    move |e| RunnerError::io(p, e)
}

fn mode(p: &Path, m: u32) -> Result<()> {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).map_err(io(p))
}

/// Copies `rels` from `from` (regular files, read beneath it) into `to`, readable by all.
pub(crate) fn copy_sources(from: &Path, rels: &[String], to: &Path) -> Result<()> {
    for rel in rels {
        let rel = rel.trim_start_matches("./");
        let bytes = arena_eval::untrusted::read_beneath(
            from,
            Path::new(rel),
            arena_eval::sources::SOURCE_CAP,
        )
        .map_err(|why| RunnerError::Other(format!("{}: {rel}: {why}", from.display())))?;
        let dest = to.join(rel);
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p).map_err(io(p))?;
        }
        std::fs::write(&dest, bytes).map_err(io(&dest))?;
        mode(&dest, 0o444)?;
    }
    Ok(())
}

/// An evaluator's directory on the host: arena's evaluator code, a private copy of the task
/// (its harness and reference: root only), the original's sources under `kernel/<uid>`, and
/// the reports' directory (root only). What else an evaluator needs (the job, the agent's
/// sources, a hidden set, a socket) its caller adds.
pub(crate) struct EvaluatorDir {
    pub code: PathBuf,
    pub harness: PathBuf,
    pub kernels: PathBuf,
    pub out: PathBuf,
}

impl EvaluatorDir {
    pub(crate) fn prepare(task: &arena_task::Task, dir: &Path) -> Result<EvaluatorDir> {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let code = dir.join("trusted");
        trusted::install(&code).map_err(io(&code))?;
        // The harness: a private copy (root only), from the task tree the lockfile pins.
        let harness = dir.join("harness");
        copy_task_tree(&task.dir, &harness.join("task"))?;
        mode(&harness, 0o700)?;
        let kernels = dir.join("kernel");
        copy_sources(
            &task.dir,
            &task.agent_files,
            &kernels.join(BASELINE.uid.to_string()),
        )?;
        let out = dir.join("out");
        std::fs::create_dir_all(&out).map_err(io(&out))?;
        mode(&out, 0o700)?;
        Ok(EvaluatorDir {
            code,
            harness,
            kernels,
            out,
        })
    }

    /// The binds every evaluator of this directory gets (code, harness, kernels read-only;
    /// the reports' directory writable).
    pub(crate) fn binds(&self) -> Vec<BindMount> {
        vec![
            bind(&self.code, trusted::DIR, true),
            bind(&self.harness, trusted::HARNESS_ROOT, true),
            bind(&self.kernels, trusted::KERNELS, true),
            bind(&self.out, OUT_DIR, false),
        ]
    }

    /// Writes `job` where the evaluator reads it (root only), bound read-only.
    pub(crate) fn job(&self, dir: &Path, job: &Job) -> Result<BindMount> {
        let job_file = dir.join("job.json");
        let text = serde_json::to_vec_pretty(job).map_err(|e| RunnerError::Other(e.to_string()))?;
        std::fs::write(&job_file, text).map_err(io(&job_file))?;
        mode(&job_file, 0o400)?;
        Ok(bind(&job_file, trusted::JOB, true))
    }
}

/// The evaluator container: arena's evaluator as its first process (root with only the
/// capabilities to start and stop other users' processes), on a read-only root, no network,
/// the image's `/task` hidden behind an empty file system, a sized scratch per kernel user
/// and one of the evaluator's own.
pub(crate) fn evaluator_config(
    image_env: &[String],
    devices: arena_runtime::DeviceGrant,
    binds: Vec<BindMount>,
    limits: arena_runtime::Limits,
    roles: &[Role],
) -> ContainerConfig {
    let evaluate = format!("{}/evaluate.py", trusted::DIR);
    let mut cfg = ContainerConfig::command(&["python3", "-I", "-B", &evaluate, trusted::JOB]);
    cfg.env = arena_runtime::spec::merge_env(image_env);
    cfg.cwd = "/".into();
    cfg.network = Network::None;
    cfg.devices = devices;
    cfg.binds = binds;
    cfg.readonly_rootfs = true;
    cfg.limits = limits;
    cfg.seccomp = arena_runtime::seccomp::Profile::Evaluator;
    cfg.capabilities = vec!["CAP_SETUID".into(), "CAP_SETGID".into(), "CAP_KILL".into()];
    // The image's task (harness and reference included) is hidden from the kernels.
    cfg.tmpfs.push(Tmpfs {
        destination: arena_eval::layout::TASK_ROOT.into(),
        bytes: 64 << 10,
        mode: 0o755,
        uid: 0,
        gid: 0,
    });
    // The evaluator's own (a derived harness compiles the task's original there).
    cfg.tmpfs.push(Tmpfs {
        destination: trusted::EVALUATOR_SCRATCH.into(),
        bytes: SCRATCH_BYTES,
        mode: 0o700,
        uid: 0,
        gid: 0,
    });
    for role in trusted::users_of(roles) {
        cfg.tmpfs.push(Tmpfs {
            destination: format!("{}/{}", trusted::SCRATCH, role.uid),
            bytes: SCRATCH_BYTES,
            mode: 0o700,
            uid: role.uid,
            gid: role.uid,
        });
    }
    cfg
}

impl TaskRun<'_> {
    /// The task's trusted harness, if it has one (and the evaluator has not refused it).
    pub(crate) fn trusted_harness(&self) -> Option<&str> {
        if self.refused.get().is_some() {
            return None;
        }
        self.task.config.trusted_harness.as_deref()
    }

    /// Why a result of this task run is self-reported: the evaluator's refusal of its derived
    /// harness, else what arena_task::derive says of the task.
    pub(crate) fn trust_reason(&self) -> Option<String> {
        if let Some(r) = self.refused.get() {
            return Some(format!("the evaluator refused the derived harness: {r}"));
        }
        arena_task::derive::trust_of(&self.task.dir, &self.task.config).reason
    }

    pub(crate) async fn trusted(&self, r: TrustedRun<'_>) -> Result<TrustedOut> {
        let ctx = self.ctx;
        let harness_rel = self
            .trusted_harness()
            .ok_or_else(|| RunnerError::Other("the task has no trusted harness".into()))?;
        let dir = ctx.rundir.item_dir(self.item).join(r.phase.to_string());
        let ed = EvaluatorDir::prepare(self.task, &dir)?;
        if let Some(staged) = r.candidate {
            // Each staged file is `<stage>/<rel>`: the stage is that many levels up.
            let stage_root = staged
                .first()
                .and_then(|s| {
                    s.host
                        .ancestors()
                        .nth(Path::new(&s.rel).components().count())
                        .map(Path::to_path_buf)
                })
                .unwrap_or_default();
            let rels: Vec<String> = staged.iter().map(|s| s.rel.clone()).collect();
            copy_sources(
                &stage_root,
                &rels,
                &ed.kernels.join(CANDIDATE.uid.to_string()),
            )?;
        }
        let timeouts = GateTimeouts::for_task(&self.task.config);
        let devices = self
            .gpu
            .profile
            .resolve()
            .map_err(|e| ctx.runtime_err(self.item, e))?;
        let mut job = Job::new(
            harness_rel,
            r.roles,
            &timeouts,
            devices.additional_gids.clone(),
        );
        job.accelerator = self.gpu.has_device();
        if let Some(pairs) = ctx.record.trusted_pairs {
            job.perf.pairs = pairs;
        }
        if let Some(n) = ctx.record.checked_calls {
            job.perf.checked_calls = n;
        }
        let mut binds = ed.binds();
        if let Some(h) = r.hidden {
            // A private copy only root may read: the kernel processes cannot open it.
            let copy = dir.join("hidden.json");
            std::fs::copy(h, &copy).map_err(io(&copy))?;
            mode(&copy, 0o400)?;
            binds.push(bind(&copy, trusted::HIDDEN, true));
            job.hidden = Some(trusted::HIDDEN.into());
            job.unseen = true;
            job.quiet_kernels = true;
        }
        binds.push(ed.job(&dir, &job)?);
        let cfg = evaluator_config(&self.env, devices, binds, self.limits(), r.roles);
        let outcome = ctx
            .container(self.item, r.phase, &self.image, cfg, timeouts.total())
            .await?;
        let out = ed.out;
        let record = EvaluatorRecord::read(&out);
        let rec = record.as_ref();
        if let Some(why) = rec.and_then(|r| r.not_derivable.as_deref()) {
            // Its words may name a hidden configuration: an unseen evaluation's are not kept.
            let why = if r.hidden.is_some() {
                "the task's runner on an unseen configuration"
            } else {
                why
            };
            // Found only when the runner ran: the task goes on with its own commands.
            tracing::warn!(task = %self.item.label(), "derived harness refused: {why}");
            let _ = self.refused.set(why.to_string());
            return Err(RunnerError::NotDerivable(why.to_string()));
        }
        if let Some(e) = rec.and_then(EvaluatorRecord::failure) {
            // On hidden configurations, only a kind of the evaluator's (redact_kind).
            let e = if r.hidden.is_some() {
                redact_kind(e.rsplit(": ").next().unwrap_or(e))
            } else {
                e.to_string()
            };
            return Err(RunnerError::Other(format!(
                "{}: arena's evaluator could not evaluate ({}): {e}",
                self.item.label(),
                r.phase,
            )));
        }
        if record.is_none() && !outcome.timed_out {
            return Err(RunnerError::Other(format!(
                "{}: arena's evaluator ended (exit {}) without a record ({})",
                self.item.label(),
                outcome.exit_code,
                r.phase
            )));
        }
        Ok(TrustedOut {
            out,
            outcome,
            record,
        })
    }
}
