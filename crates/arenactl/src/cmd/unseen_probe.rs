//! `arenactl unseen generate --probe LOCKFILE`: the probe's rounds (arena_run::probe) with
//! their runs submitted to a runner and followed here, then the set sealed. A probe that stops
//! (Ctrl-C, a crash, a failed task run) keeps its work beside the set: the same command goes
//! on from there, and probes that finished are not run again.

use std::path::Path;

use anyhow::Context;
use arena_image::Lockfile;
use arena_proto::v1::{RunState, SubmitRunRequest};
use arena_run::probe::{chosen, probe_rounds, work_dir, Round, RoundRunner};
use arena_run::RunError;
use arena_task::hidden::{seal_set, Manifest, Skipped};
use arena_task::unseen::GenOptions;
use arena_task::Task;

use super::run::{connect, runner_path};
use super::run_follow::{watch_until_end, OnInterrupt};
use super::runtime;
use crate::cli::UnseenGenerateArgs;

/// Every task is in the lockfile, with the very tree it is generated from: the probe runs
/// the locked image of that tree. Every task that is not is named.
fn check_locked(tasks: &[Task], lock: &Lockfile, lock_path: &Path) -> anyhow::Result<()> {
    let problems: Vec<String> = tasks
        .iter()
        .filter_map(|t| arena_run::plan::check_locked_tree(lock, lock_path, t).err())
        .map(|e| format!("{e}: a probe runs the task's locked image"))
        .collect();
    anyhow::ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// Probes, then seals the set into `args.out`.
pub(super) fn probed_set(
    tasks: &[Task],
    refused: Vec<Skipped>,
    opts: GenOptions,
    lock_path: &Path,
    args: &UnseenGenerateArgs,
) -> anyhow::Result<Manifest> {
    let lock = super::preflight::lockfile("--probe", lock_path)?;
    let (runner, token) = super::run::resolve(&args.remote.runner, &args.remote.token_file)?;
    check_locked(tasks, &lock, lock_path)?;
    let lock_digest = arena_image::Digest::of_file(lock_path)
        .with_context(|| format!("reading {}", lock_path.display()))?
        .0
        .to_string();
    let work = work_dir(&args.out)?;
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let mut skipped = refused;
    let probed = runtime()?
        .block_on(async {
            let (client, _server) = connect(&runner, &token, &args.local).await?;
            let mut runner = ProbeClient {
                client,
                runner: &runner,
                args,
                lock_path,
            };
            probe_rounds(
                tasks,
                opts,
                args.probe_rounds,
                &work,
                &mut skipped,
                &mut runner,
            )
            .await
            .map_err(anyhow::Error::from)
        })
        .map_err(|e| {
            e.context(format!(
                "the probe stopped; its candidate sets and runs are kept in {}: the same \
                 command goes on from there",
                work.display()
            ))
        })?;
    let (sets, record) = chosen(probed, opts.per_task, lock_digest, &mut skipped);
    let m = seal_set(&args.out, sets, skipped, opts, Some(record))?;
    std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    Ok(m)
}

/// A round's probe runs, submitted to the runner and followed to their end.
struct ProbeClient<'a> {
    client: super::endpoint::Client,
    /// The resolved --runner.
    runner: &'a Option<String>,
    args: &'a UnseenGenerateArgs,
    lock_path: &'a Path,
}

impl RoundRunner for ProbeClient<'_> {
    async fn run(&mut self, round: Round<'_>) -> arena_run::Result<String> {
        self.submit_and_follow(round)
            .await
            .map_err(|e| RunError::Other(format!("{e:#}")))
    }
}

impl ProbeClient<'_> {
    async fn submit_and_follow(&mut self, round: Round<'_>) -> anyhow::Result<String> {
        let path = |p: &Path| runner_path(self.runner, p);
        let submitted = self
            .client
            .submit_run(SubmitRunRequest {
                image_lock: path(self.lock_path)?,
                tasks: round.tasks,
                runs: 1,
                run_dir: path(round.run_dir)?,
                hidden_set: path(round.set_dir)?,
                probe_unseen: true,
                ..Default::default()
            })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner();
        let what = format!(
            "task probes (round {} of at most {})",
            round.index + 1,
            round.of
        );
        let status = watch_until_end(
            &mut self.client,
            &submitted,
            round.run_dir,
            self.args.json.json,
            &what,
            OnInterrupt::Cancel,
        )
        .await?
        .context("the probe was interrupted")?;
        let state = RunState::try_from(status.state).unwrap_or(RunState::Failed);
        anyhow::ensure!(
            state != RunState::Cancelled,
            "the probe was cancelled; nothing was sealed"
        );
        Ok(status.error)
    }
}
