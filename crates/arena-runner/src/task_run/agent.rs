//! The agent phase: a fresh workspace (a copy of the task tree, without build outputs) on a
//! file system of its own size, then the agent in its own container — the workspace
//! read-write, the task read-only at `/reference`, the prompt at `/arena/prompt.md`, the
//! agent's own read-only mounts, its network, the task run's GPU — on a read-only root with
//! sized tmpfs at /tmp and /var/tmp, under the agent's timeout, which a watchdog inside the
//! container enforces too (a runner killed meanwhile does not leave it running).

use std::path::Path;
use std::time::Instant;

use arena_proto::v1::EventKind;
use arena_run::agent::{PROMPT_FILE, REFERENCE, WORKSPACE};
use arena_run::events::Detail;
use arena_run::result::Timings;
use arena_runtime::{ContainerConfig, ImageRef, RunOutcome};
use arena_task::EntryKind;

use super::phase::ContainerPhase;
use super::{bind, redact, TaskRun};
use crate::error::{Result, RunnerError};

/// Copies the task tree (without build/ and caches) into a new workspace. Every file is the
/// agent's to edit: a task tree that is read-only where it lies (a shared checkout, a
/// materialized slice) would otherwise give read-only kernel files, which the agent's user
/// (root in its container, without the capability to override file modes) cannot write.
/// Found on an H200: an agent's edit of vLLM's rms_norm failed with "Permission denied".
pub(crate) fn copy_task_tree(task_dir: &Path, dest: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dest).map_err(|e| RunnerError::io(dest, e))?;
    for e in arena_task::task_tree(task_dir)? {
        let to = dest.join(&e.rel);
        match &e.kind {
            EntryKind::Dir => {
                std::fs::create_dir_all(&to).map_err(|err| RunnerError::io(&to, err))?
            }
            EntryKind::File { .. } => {
                std::fs::copy(&e.path, &to).map_err(|err| RunnerError::io(&to, err))?;
                let meta = std::fs::metadata(&to).map_err(|err| RunnerError::io(&to, err))?;
                let mode = meta.permissions().mode();
                if mode & 0o200 == 0 {
                    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode | 0o200))
                        .map_err(|err| RunnerError::io(&to, err))?;
                }
            }
            EntryKind::Symlink { target } => {
                std::os::unix::fs::symlink(target, &to).map_err(|err| RunnerError::io(&to, err))?
            }
        }
    }
    Ok(())
}

/// Seconds past the agent's timeout after which the watchdog in its container kills it
/// (the runner kills it at the timeout; this holds if the runner is gone). The runner's
/// clock starts once the container has started, the watchdog's as its first process runs, a
/// moment before: the runner's deadline comes first by about this much, and a dead runner's
/// agent ends at most this long past its deadline, and its container a moment later (issue
/// 41's bar: 5 s; measured 5.1 s with 5 here, so 4).
pub(crate) const DEADLINE_GRACE_S: u64 = 4;

/// `args` run under a watchdog: `sh` (the container's first process) starts them, and a
/// second process kills every process but the first after `seconds`; the first then ends,
/// and the container with it.
pub(crate) fn with_deadline(seconds: u64, args: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = [
        "/bin/sh",
        "-c",
        "n=$1; shift; \"$@\" & p=$!; (sleep \"$n\"; kill -KILL -1) 2>/dev/null & w=$!; \
         wait $p; s=$?; kill -KILL $w 2>/dev/null; exit $s",
        "arena-deadline",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    out.push(seconds.to_string());
    out.extend(args);
    out
}

/// The agent's container and the image it ran in.
pub(crate) struct AgentRun {
    pub outcome: RunOutcome,
    pub image: ImageRef,
}

impl TaskRun<'_> {
    pub(crate) async fn agent(
        &self,
        agent_image: &Option<(ImageRef, Vec<String>)>,
        timings: &mut Timings,
    ) -> Result<AgentRun> {
        let (ctx, item, task) = (self.ctx, self.item, self.task);
        let t = Instant::now();
        let dir = ctx.rundir.item_dir(item);
        let workspace = dir.join("workspace");
        ctx.rt
            .mount_scratch(&workspace, ctx.resources.workspace_bytes)
            .await
            .map_err(|e| ctx.runtime_err(item, e))?;
        copy_task_tree(&task.dir, &workspace)?;
        timings.workspace_s = Some(t.elapsed().as_secs_f64());

        let (image, env) = match agent_image {
            Some((i, e)) => (i.clone(), e.clone()),
            None => (self.image.clone(), self.env.clone()),
        };
        let agent_dir = dir.join("agent");
        std::fs::create_dir_all(&agent_dir).map_err(|e| RunnerError::io(&agent_dir, e))?;
        let prompt = arena_run::prompt::prompt(task, &ctx.agent, &self.gpu.kind);
        let pf = agent_dir.join("prompt.md");
        std::fs::write(&pf, &prompt).map_err(|e| RunnerError::io(&pf, e))?;
        let mut cfg = ContainerConfig::command(&[]);
        cfg.args = with_deadline(
            ctx.agent.timeout_s + DEADLINE_GRACE_S,
            ctx.agent.render_command(&task.id, &prompt),
        );
        let mut envs = env;
        envs.extend(ctx.agent.environment(|k| ctx.env.get(k).cloned()));
        envs.extend(ctx.secrets.environment());
        envs.push(format!("ARENA_TASK_ID={}", task.id));
        envs.push(format!("ARENA_PROMPT_FILE={PROMPT_FILE}"));
        envs.push(format!("ARENA_WORKSPACE={WORKSPACE}"));
        cfg.env = arena_runtime::spec::merge_env(&envs);
        cfg.cwd = WORKSPACE.into();
        cfg.network = crate::policy::agent_network(&ctx.agent.network);
        cfg.devices = self
            .gpu
            .profile
            .resolve()
            .map_err(|e| ctx.runtime_err(item, e))?;
        cfg.tmp_bytes = 1 << 30;
        cfg.readonly_rootfs = true;
        cfg.tmpfs.push(arena_runtime::Tmpfs {
            destination: "/var/tmp".into(),
            bytes: 1 << 30,
            mode: 0o1777,
            uid: 0,
            gid: 0,
        });
        cfg.limits = self.limits();
        cfg.binds = vec![
            bind(&workspace, WORKSPACE, false),
            bind(&task.dir, REFERENCE, true),
            bind(&agent_dir, "/arena", true),
        ];
        for m in &ctx.agent.mounts {
            cfg.binds.push(bind(&m.host, &m.container, true));
        }
        ctx.events.emit(
            EventKind::AgentStarted,
            Some(item),
            Detail {
                gpu: Some(self.gpu.index),
                message: ctx.agent.name.clone(),
                ..Default::default()
            },
        );
        let out = ctx
            .container(
                item,
                ContainerPhase::Agent,
                &image,
                cfg,
                ctx.agent.timeout_s,
            )
            .await?;
        // Before anything is staged or kept from the workspace.
        let scrubbed = redact::scrub(&ctx.secrets, &[&out.stdout, &out.stderr], &workspace)?;
        for (path, names) in &scrubbed {
            tracing::warn!(
                "{}: the agent left {} in {}; redacted",
                item.label(),
                names.join(", "),
                path.display()
            );
        }
        ctx.events.emit(
            EventKind::AgentFinished,
            Some(item),
            Detail {
                gpu: Some(self.gpu.index),
                passed: out.exit_code == 0 && !out.timed_out,
                message: if out.timed_out {
                    format!("timed out after {} s", ctx.agent.timeout_s)
                } else {
                    format!("exit {} after {:.1} s", out.exit_code, out.durations.run_s)
                },
                ..Default::default()
            },
        );
        Ok(AgentRun {
            outcome: out,
            image,
        })
    }
}
