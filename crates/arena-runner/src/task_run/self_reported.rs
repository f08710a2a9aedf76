//! The evaluator container of a task whose harness is its own: arena's gate runner (root,
//! with only the capabilities to start and stop another user's processes) runs the task's
//! commands as each kernel's user, in each kernel's copy of the image's task, on a read-only
//! root. A kernel writes only its own sized file systems (its tree's additions, `build/`, its
//! scratch); the runner copies the reports, and the wall time of every command by its own
//! clock, where only the runner writes. In a single evaluation the agent's sources are bound
//! read-only over the image's task (the copy takes them); in a paired one the image's task
//! stays pristine for the original and the sources are bound apart, for the candidate's tree.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use arena_eval::evaluator_record::EvaluatorRecord;
use arena_eval::layout::{self, OUT_DIR};
use arena_eval::self_reported::{GatesJob, CANDIDATE_SOURCES, VIEWS};
use arena_eval::sources::StagedSource;
use arena_eval::trusted;
use arena_runtime::{BindMount, ContainerConfig, Network, RunOutcome, Tmpfs};
use arena_task::EntryKind;

use super::phase::ContainerPhase;
use super::{bind, TaskRun};
use crate::error::{Result, RunnerError};

/// One self-reported evaluator container.
pub(crate) struct SelfReportedRun<'a> {
    pub phase: ContainerPhase,
    pub job: GatesJob,
    pub sources: &'a [StagedSource],
    /// Where the sources go: over the image's task (false), or apart for a paired job's
    /// candidate tree (true).
    pub sources_apart: bool,
    pub extra_binds: &'a [BindMount],
}

/// What the gate runner left: its out directory, the container, and its record.
pub(crate) struct SelfReportedOut {
    pub out: PathBuf,
    pub outcome: RunOutcome,
    pub record: Option<EvaluatorRecord>,
    /// What the gates it never reached say, where the container ran past its job's limit.
    pub timeout_note: Option<String>,
}

/// What a container that ran past its limit left its unreached gates to say.
pub(crate) fn timeout_note(outcome: &RunOutcome, limit_s: u64) -> Option<String> {
    outcome
        .timed_out
        .then(|| format!("evaluator timed out after {limit_s} s"))
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> RunnerError + '_ {
    move |e| RunnerError::io(p, e)
}

/// A view of the task at `dir`: every entry of the task tree a link into the container's
/// `/task` (so the agent's bound sources are what it finds), except the files of `own`, which
/// are real files here (a configuration's harness), and their directories, made real to hold
/// them; `build` links to the harness's `build/`.
pub(crate) fn make_view(task_dir: &Path, own: &[(String, String)], dir: &Path) -> Result<()> {
    let own_dirs: BTreeSet<String> = own
        .iter()
        .flat_map(|(rel, _)| {
            let parts: Vec<&str> = rel.split('/').collect();
            (1..parts.len()).map(move |n| parts[..n].join("/"))
        })
        .collect();
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let link = |rel: &str| -> Result<()> {
        let at = dir.join(rel);
        std::os::unix::fs::symlink(format!("{}/{rel}", layout::TASK_ROOT), &at).map_err(io(&at))
    };
    for e in arena_task::task_tree(task_dir)? {
        let parent = e.rel.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
        // Only entries directly inside the view's real directories are placed.
        if !(parent.is_empty() || own_dirs.contains(parent)) {
            continue;
        }
        if let Some((_, text)) = own.iter().find(|(r, _)| *r == e.rel) {
            let at = dir.join(&e.rel);
            std::fs::write(&at, text).map_err(io(&at))?;
        } else if own_dirs.contains(&e.rel) && matches!(e.kind, EntryKind::Dir) {
            let at = dir.join(&e.rel);
            std::fs::create_dir_all(&at).map_err(io(&at))?;
        } else {
            link(&e.rel)?;
        }
    }
    link("build")
}

impl TaskRun<'_> {
    pub(crate) async fn self_reported(&self, r: SelfReportedRun<'_>) -> Result<SelfReportedOut> {
        let ctx = self.ctx;
        let dir = ctx.rundir.item_dir(self.item).join(r.phase.to_string());
        let out = dir.join("out");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).map_err(io(&out))?;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o700)).map_err(io(&out))?;
        let code = dir.join("trusted");
        let _ = std::fs::remove_dir_all(&code);
        trusted::install(&code).map_err(io(&code))?;
        let job_file = dir.join("job.json");
        let text =
            serde_json::to_vec_pretty(&r.job).map_err(|e| RunnerError::Other(e.to_string()))?;
        let _ = std::fs::remove_file(&job_file);
        std::fs::write(&job_file, text).map_err(io(&job_file))?;
        std::fs::set_permissions(&job_file, std::fs::Permissions::from_mode(0o400))
            .map_err(io(&job_file))?;

        let gates = format!("{}/gates.py", trusted::DIR);
        // The standard library is all the gate runner needs: no site-packages on its start.
        let mut cfg =
            ContainerConfig::command(&["python3", "-I", "-S", "-B", &gates, trusted::JOB]);
        cfg.env = arena_runtime::spec::merge_env(&self.env);
        cfg.cwd = "/".into();
        cfg.network = Network::None;
        cfg.devices = self
            .gpu
            .profile
            .resolve()
            .map_err(|e| ctx.runtime_err(self.item, e))?;
        cfg.readonly_rootfs = true;
        cfg.limits = self.limits();
        cfg.seccomp = arena_runtime::seccomp::Profile::Evaluator;
        cfg.capabilities = vec!["CAP_SETUID".into(), "CAP_SETGID".into(), "CAP_KILL".into()];
        cfg.tmpfs = r
            .job
            .spaces
            .iter()
            .map(|sp| Tmpfs {
                destination: sp.destination.clone(),
                bytes: sp.bytes,
                mode: sp.mode,
                uid: sp.uid,
                gid: sp.gid,
            })
            .collect();
        cfg.binds = vec![
            bind(&code, trusted::DIR, true),
            bind(&out, OUT_DIR, false),
            bind(&job_file, trusted::JOB, true),
        ];
        for s in r.sources {
            let at = if r.sources_apart {
                format!("{CANDIDATE_SOURCES}/{}", s.rel.trim_start_matches("./"))
            } else {
                layout::source_path(&s.rel)
            };
            cfg.binds.push(bind(&s.host, &at, true));
        }
        cfg.binds.extend(r.extra_binds.iter().cloned());
        let limit = r.job.limit_s();
        let outcome = ctx
            .container(self.item, r.phase, &self.image, cfg, limit)
            .await?;
        let record = EvaluatorRecord::read(&out);
        if let Some(e) = record.as_ref().and_then(|r| r.error.as_deref()) {
            return Err(RunnerError::Other(format!(
                "{}: arena's gate runner failed ({}): {e}",
                self.item.label(),
                r.phase
            )));
        }
        Ok(SelfReportedOut {
            out,
            timeout_note: timeout_note(&outcome, limit),
            outcome,
            record,
        })
    }

    /// The views of `configs` configurations for a probe, each holding its own rewritten
    /// files, bound read-only at /arena/views.
    pub(crate) fn views(
        &self,
        dir: &Path,
        variants: &[Vec<(String, String)>],
    ) -> Result<BindMount> {
        let _ = std::fs::remove_dir_all(dir);
        for (k, own) in variants.iter().enumerate() {
            make_view(&self.task.dir, own, &dir.join(k.to_string()))?;
        }
        Ok(bind(dir, VIEWS, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_links_everything_but_its_own_harness() {
        let d = tempfile::tempdir().unwrap();
        let task = d.path().join("task");
        for f in [
            "config.yaml",
            "source/k.py",
            "scripts/run.py",
            "scripts/util.py",
            "data/x.bin",
        ] {
            let p = task.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, f).unwrap();
        }
        let view = d.path().join("v");
        make_view(
            &task,
            &[("scripts/run.py".into(), "TEST_SHAPES = [(7,)]".into())],
            &view,
        )
        .unwrap();
        let target = |rel: &str| std::fs::read_link(view.join(rel)).unwrap();
        assert_eq!(target("config.yaml"), Path::new("/task/config.yaml"));
        assert_eq!(target("source"), Path::new("/task/source"));
        assert_eq!(target("data"), Path::new("/task/data"));
        assert_eq!(
            target("scripts/util.py"),
            Path::new("/task/scripts/util.py")
        );
        assert_eq!(target("build"), Path::new("/task/build"));
        assert!(view.join("scripts").symlink_metadata().unwrap().is_dir());
        assert_eq!(
            std::fs::read_to_string(view.join("scripts/run.py")).unwrap(),
            "TEST_SHAPES = [(7,)]"
        );
    }
}
