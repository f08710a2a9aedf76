//! `arenactl unseen generate --probe LOCKFILE`: a set whose every configuration the original
//! kernel passed in its task's image. Each round makes twice the configurations a task needs
//! (a new seed, labels past the last round's), seals them as a private candidate set, and has
//! the runner run the original alone on each of them (a probe run: no baseline, no agent).
//! Tasks left short of passing configurations, or missing a category that was made but never
//! passed, go another round. The sealed set takes passing configurations, the categories in
//! turn; a task whose original passed none is skipped, saying so. The candidate sets and the
//! probe runs live in `.<set name>.probe` beside the set, removed once it is sealed. A probe
//! that stops (Ctrl-C, a crash, a failed task run) keeps it: the same command again makes the
//! same candidates, finds them sealed there, and resumes their probe runs, so probes that
//! finished are not run again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use arena_image::Lockfile;
use arena_proto::v1::{RunState, SubmitRunRequest};
use arena_run::{Item, RunDir};
use arena_task::hidden::{
    choose, generate_sets, needs_more, seal_set, verify_set, Manifest, ProbeRecord, ProbedTask,
    SkipKind, Skipped, TaskUnseen,
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
    let lock = Lockfile::load(lock_path)?;
    check_locked(tasks, &lock, lock_path)?;
    let lock_digest = arena_image::Digest::of_file(lock_path)
        .with_context(|| format!("reading {}", lock_path.display()))?
        .0
        .to_string();
    let work = work_dir(&args.out)?;
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let mut skipped = refused;
    let probed = runtime()?
        .block_on(probe_rounds(
            tasks,
            opts,
            lock_path,
            args,
            &work,
            &mut skipped,
        ))
        .map_err(|e| {
            e.context(format!(
                "the probe stopped; its candidate sets and runs are kept in {}: the same \
                 command goes on from there",
                work.display()
            ))
        })?;
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
    std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    Ok(m)
}

/// `.<name>.probe` beside the set `out`: where its probe works, the same for the same `out`.
fn work_dir(out: &Path) -> anyhow::Result<PathBuf> {
    let name = out
        .file_name()
        .with_context(|| format!("{}: --out needs a directory name", out.display()))?;
    Ok(out.with_file_name(format!(".{}.probe", name.to_string_lossy())))
}

/// Seals `candidates` as round `dir`'s candidate set, or finds them sealed there by an
/// earlier start of the same probe (then its run resumes). Candidates that differ from what
/// an earlier start sealed replace it, and that start's run goes with it.
fn seal_candidates(
    dir: &Path,
    candidates: Vec<TaskUnseen>,
    opts: GenOptions,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (set_dir, run_dir) = (dir.join("candidates"), dir.join("run"));
    let fresh = dir.join("candidates.new");
    let _ = std::fs::remove_dir_all(&fresh);
    let new = seal_set(&fresh, candidates, Vec::new(), opts, None)?;
    let same = verify_set(&set_dir).is_ok_and(|old| old.set_digest == new.set_digest);
    if same {
        std::fs::remove_dir_all(&fresh)?;
    } else {
        for old in [&set_dir, &run_dir] {
            if old.exists() {
                std::fs::remove_dir_all(old)
                    .with_context(|| format!("removing {}", old.display()))?;
            }
        }
        std::fs::rename(&fresh, &set_dir)
            .with_context(|| format!("renaming {} into place", fresh.display()))?;
    }
    Ok((set_dir, run_dir))
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
        let (set_dir, run_dir) = seal_candidates(
            &work.join(format!("round-{r}")),
            candidates.clone(),
            round_opts,
        )?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_sets(seed: u64) -> (Vec<TaskUnseen>, GenOptions) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks");
        let tasks: Vec<Task> = arena_task::discover(&root)
            .unwrap()
            .into_iter()
            .map(|f| Task::load(&f.dir, &f.id).unwrap())
            .collect();
        let opts = GenOptions {
            seed,
            ..Default::default()
        };
        let (sets, skipped) = generate_sets(&tasks, opts);
        assert!(skipped.is_empty() && !sets.is_empty());
        (sets, opts)
    }

    /// A probe started again finds the same candidates sealed and keeps its run (which
    /// resumes); different candidates replace both, so no result of another set is read.
    #[test]
    fn a_restarted_probe_keeps_its_run_only_for_the_same_candidates() {
        let d = tempfile::tempdir().unwrap();
        let round = d.path().join("round-0");
        let (sets, opts) = sample_sets(7);
        let (set_dir, run_dir) = seal_candidates(&round, sets.clone(), opts).unwrap();
        let digest = verify_set(&set_dir).unwrap().set_digest;
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::write(run_dir.join("finished-probe"), "kept").unwrap();

        let again = seal_candidates(&round, sets, opts).unwrap();
        assert_eq!(again, (set_dir.clone(), run_dir.clone()));
        assert_eq!(verify_set(&set_dir).unwrap().set_digest, digest);
        assert!(run_dir.join("finished-probe").exists());
        assert!(!round.join("candidates.new").exists());

        let (other, opts) = sample_sets(8);
        seal_candidates(&round, other, opts).unwrap();
        assert_ne!(verify_set(&set_dir).unwrap().set_digest, digest);
        assert!(!run_dir.exists(), "the other set's run must go");
    }

    #[test]
    fn the_probe_works_beside_its_set() {
        assert_eq!(
            work_dir(Path::new("out/hidden")).unwrap(),
            Path::new("out/.hidden.probe")
        );
        assert!(work_dir(Path::new("/")).is_err());
    }
}
