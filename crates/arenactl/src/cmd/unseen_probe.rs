//! `arenactl unseen generate --probe LOCKFILE`: a set whose every configuration the original
//! kernel passed in its task's image. Each round makes twice the configurations a task needs
//! (a new seed, labels past the last round's), seals them as a private candidate set, and has
//! the runner run the original alone on each of them (a probe run: no baseline, no agent).
//! Tasks left short of passing configurations, or missing a category that was made but never
//! passed, go another round. The sealed set takes passing configurations, the categories in
//! turn; a task whose original passed none is skipped, saying so. The candidate sets and the
//! probe runs live in a private directory beside the set, removed once it is sealed (kept,
//! and named, if the probe fails).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use arena_image::Lockfile;
use arena_proto::v1::{RunState, SubmitRunRequest};
use arena_run::{Item, RunDir};
use arena_task::hidden::{
    choose, generate_sets, needs_more, seal_set, Manifest, ProbeRecord, ProbedTask, SkipKind,
    Skipped, TaskUnseen,
};
use arena_task::unseen::{GenOptions, UnseenConfig};
use arena_task::Task;

use super::run::{connect, runner_path, watch_until_end, OnInterrupt};
use super::runtime;
use crate::cli::UnseenGenerateArgs;

/// Where each task's probes ran, and what they found.
#[derive(Default)]
struct Probed {
    /// The first round's set of each task: its harness and declaration.
    template: BTreeMap<String, TaskUnseen>,
    /// Every candidate configuration run, with whether the original passed it.
    configs: BTreeMap<String, Vec<(UnseenConfig, bool)>>,
    /// (image digest, accelerator kind) of each task's probe.
    ran_on: BTreeMap<String, (String, String)>,
    rounds: u32,
}

/// The seed of round `r` (round 0 is the set's own seed).
fn round_seed(seed: u64, r: u32) -> u64 {
    seed ^ u64::from(r).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Every task is in the lockfile, with the very tree it is generated from: the probe runs
/// the locked image of that tree.
fn check_locked(tasks: &[Task], lock: &Lockfile, lock_path: &Path) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    for t in tasks {
        match lock.task_image(t.id.as_str()) {
            None => problems.push(format!(
                "{}: not in {}: a probe runs the task's locked image",
                t.id,
                lock_path.display()
            )),
            Some(rec) => {
                let found = arena_task::task_digest(&t.dir)?.to_string();
                if rec.task_digest.as_deref() != Some(found.as_str()) {
                    problems.push(format!(
                        "{}: {} has digest {found}, {} pins {}: generate from the tasks the \
                         lockfile was made from",
                        t.id,
                        t.dir.display(),
                        lock_path.display(),
                        rec.task_digest.as_deref().unwrap_or("none")
                    ));
                }
            }
        }
    }
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
    let lock = Lockfile::load(lock_path)?;
    check_locked(tasks, &lock, lock_path)?;
    let lock_digest = arena_image::Digest::of_file(lock_path)
        .with_context(|| format!("reading {}", lock_path.display()))?
        .0
        .to_string();
    let parent = match args.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let work = tempfile::Builder::new()
        .prefix(".unseen-probe-")
        .tempdir_in(parent)
        .with_context(|| format!("a private directory in {}", parent.display()))?;
    let mut skipped = refused;
    let probed = runtime()?.block_on(probe_rounds(
        tasks,
        opts,
        lock_path,
        args,
        work.path(),
        &mut skipped,
    ));
    let probed = match probed {
        Ok(p) => p,
        Err(e) => {
            let kept = work.keep();
            return Err(e.context(format!(
                "the probe's candidate sets and runs are kept in {}",
                kept.display()
            )));
        }
    };
    let mut sets = Vec::new();
    let mut record = ProbeRecord {
        image_lock_digest: lock_digest,
        rounds: probed.rounds,
        tasks: Vec::new(),
    };
    for (id, mut template) in probed.template {
        let configs = &probed.configs[&id];
        let chosen = choose(configs, opts.per_task);
        let (image, device) = probed.ran_on.get(&id).cloned().unwrap_or_default();
        if chosen.is_empty() {
            skipped.push(Skipped {
                task_id: id.clone(),
                reason: format!(
                    "the original kernel failed all {} configurations probed in image {image}",
                    configs.len()
                ),
                kind: Some(SkipKind::OriginalFails),
            });
            continue;
        }
        record.tasks.push(ProbedTask {
            task_id: id.clone(),
            image,
            device,
            probed: configs.len(),
            passed: configs.iter().filter(|(_, ok)| *ok).count(),
        });
        template.configs = chosen;
        sets.push(template);
    }
    let m = seal_set(&args.out, sets, skipped, opts, Some(record))?;
    Ok(m)
}

/// The rounds of generation and probing.
async fn probe_rounds(
    tasks: &[Task],
    opts: GenOptions,
    lock_path: &Path,
    args: &UnseenGenerateArgs,
    work: &Path,
    skipped: &mut Vec<Skipped>,
) -> anyhow::Result<Probed> {
    let (mut client, _server) = connect(&args.runner, &args.token_file, &args.local).await?;
    let path = |p: &Path| runner_path(&args.runner, p);
    let mut probed = Probed::default();
    let mut pending: Vec<&Task> = tasks.iter().collect();
    for r in 0..args.probe_rounds {
        let round_opts = GenOptions {
            seed: round_seed(opts.seed, r),
            per_task: opts.per_task * 2,
            first_label: r as usize * 10_000,
            ..opts
        };
        let (sets, skips) = generate_sets(pending.iter().copied(), round_opts);
        if r == 0 {
            skipped.extend(skips);
        }
        // Only configurations not run before.
        let mut candidates = Vec::new();
        for mut u in sets {
            let before = probed.configs.get(&u.task_id);
            u.configs
                .retain(|c| !before.is_some_and(|b| b.iter().any(|(p, _)| p.entry == c.entry)));
            if u.configs.is_empty() {
                continue;
            }
            probed
                .template
                .entry(u.task_id.clone())
                .or_insert_with(|| TaskUnseen {
                    configs: Vec::new(),
                    ..u.clone()
                });
            candidates.push(u);
        }
        if candidates.is_empty() {
            break;
        }
        probed.rounds = r + 1;
        let dir = work.join(format!("round-{r}"));
        let (set_dir, run_dir) = (dir.join("candidates"), dir.join("run"));
        seal_set(&set_dir, candidates.clone(), Vec::new(), round_opts, None)?;
        let submitted = client
            .submit_run(SubmitRunRequest {
                image_lock: path(lock_path)?,
                tasks: candidates.iter().map(|u| u.task_id.clone()).collect(),
                runs: 1,
                run_dir: path(&run_dir)?,
                hidden_set: path(&set_dir)?,
                probe_unseen: true,
                ..Default::default()
            })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner();
        let what = format!(
            "task probes (round {} of at most {})",
            r + 1,
            args.probe_rounds
        );
        let status = watch_until_end(
            &mut client,
            &submitted,
            &run_dir,
            args.json.json,
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
        let rundir = RunDir::new(&run_dir)?;
        for u in &candidates {
            let item = Item {
                task_id: u.task_id.clone(),
                repeat: 0,
            };
            let result = rundir.load_result(&item).with_context(|| {
                format!(
                    "{}: the probe has no result (see {}): {}",
                    u.task_id,
                    rundir.item_dir(&item).display(),
                    status.error
                )
            })?;
            let passed = result.unseen.map(|x| x.original_passed).unwrap_or_default();
            anyhow::ensure!(
                passed.len() == u.configs.len(),
                "{}: the probe judged {} of {} configurations",
                u.task_id,
                passed.len(),
                u.configs.len()
            );
            let image = result.extra["probe"]["image"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let device = result.gpu.map(|g| g.kind).unwrap_or_default();
            probed.ran_on.insert(u.task_id.clone(), (image, device));
            probed
                .configs
                .entry(u.task_id.clone())
                .or_default()
                .extend(u.configs.iter().cloned().zip(passed));
        }
        pending.retain(|t| {
            probed
                .configs
                .get(t.id.as_str())
                .is_some_and(|c| needs_more(c, opts.per_task))
        });
        if pending.is_empty() {
            break;
        }
    }
    Ok(probed)
}
