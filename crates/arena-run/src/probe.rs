//! The rounds of a probed unseen set (`arenactl unseen generate --probe LOCKFILE`): a set
//! whose every configuration the original kernel passed in its task's image. Each round makes
//! twice the configurations a task needs (a new seed, labels past the last round's), seals
//! them as a private candidate set, and has a runner run the original alone on each of them
//! (a probe run: no baseline, no agent; [`RoundRunner`], which the client that reaches the
//! runner carries out). Tasks left short of passing configurations, or missing a category that
//! was made but never passed, go another round. The sealed set takes passing configurations,
//! the categories in turn ([`chosen`]); a task whose original passed none is skipped, saying
//! so. The candidate sets and the probe runs live in `.<set name>.probe` beside the set
//! ([`work_dir`]): a probe that stops keeps them, and the same command again makes the same
//! candidates, finds them sealed there, and resumes their probe runs.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};

use arena_task::hidden::{
    choose, generate_sets, needs_more, seal_set, verify_set, ProbeRecord, ProbedTask, SkipKind,
    Skipped, TaskUnseen,
};
use arena_task::unseen::{GenOptions, UnseenConfig};
use arena_task::Task;

use crate::error::{Result, RunError};
use crate::rundir::{Item, RunDir};

/// Where each task's probes ran, and what they found.
#[derive(Debug, Default)]
pub struct Probed {
    /// The first round's set of each task: its harness and declaration.
    pub template: BTreeMap<String, TaskUnseen>,
    /// Every candidate configuration run, with whether the original passed it.
    pub configs: BTreeMap<String, Vec<(UnseenConfig, bool)>>,
    /// (image digest, accelerator kind) of each task's probe.
    pub ran_on: BTreeMap<String, (String, String)>,
    pub rounds: u32,
}

/// One round's probe runs, for a [`RoundRunner`] to carry out: the original of each of
/// `tasks` on the candidate set sealed in `set_dir`, its results written below `run_dir`.
pub struct Round<'a> {
    /// 0-based, of at most `of`.
    pub index: u32,
    pub of: u32,
    pub tasks: Vec<String>,
    pub set_dir: &'a Path,
    pub run_dir: &'a Path,
}

/// Runs a round's probes to their end (a client of a runner: submit, follow, and say how the
/// run ended). `Ok` with the run's error text (empty when none), for the message of a task
/// that then has no result; `Err` where the round did not end (cancelled, interrupted).
pub trait RoundRunner {
    fn run(&mut self, round: Round<'_>) -> impl Future<Output = Result<String>>;
}

/// The seed of round `r` (round 0 is the set's own seed).
pub fn round_seed(seed: u64, r: u32) -> u64 {
    seed ^ u64::from(r).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// `.<name>.probe` beside the set `out`: where its probe works, the same for the same `out`.
pub fn work_dir(out: &Path) -> Result<PathBuf> {
    let name = out.file_name().ok_or_else(|| {
        RunError::invalid(
            out.display(),
            "--out",
            "a probed set needs a directory name",
        )
    })?;
    Ok(out.with_file_name(format!(".{}.probe", name.to_string_lossy())))
}

/// Seals `candidates` as round `dir`'s candidate set, or finds them sealed there by an
/// earlier start of the same probe (then its run resumes). Candidates that differ from what
/// an earlier start sealed replace it, and that start's run goes with it.
pub fn seal_candidates(
    dir: &Path,
    candidates: Vec<TaskUnseen>,
    opts: GenOptions,
) -> Result<(PathBuf, PathBuf)> {
    let (set_dir, run_dir) = (dir.join("candidates"), dir.join("run"));
    let fresh = dir.join("candidates.new");
    let _ = std::fs::remove_dir_all(&fresh);
    let new = seal_set(&fresh, candidates, Vec::new(), opts, None)?;
    let same = verify_set(&set_dir).is_ok_and(|old| old.set_digest == new.set_digest);
    if same {
        std::fs::remove_dir_all(&fresh).map_err(|e| RunError::io(&fresh, e))?;
    } else {
        for old in [&set_dir, &run_dir] {
            if old.exists() {
                std::fs::remove_dir_all(old).map_err(|e| RunError::io(old, e))?;
            }
        }
        std::fs::rename(&fresh, &set_dir).map_err(|e| RunError::io(&set_dir, e))?;
    }
    Ok((set_dir, run_dir))
}

/// The rounds of generation and probing, at most `rounds` of them, below `work`. The
/// tasks the first round's generation refuses are added to `skipped`.
pub async fn probe_rounds(
    tasks: &[Task],
    opts: GenOptions,
    rounds: u32,
    work: &Path,
    skipped: &mut Vec<Skipped>,
    runner: &mut impl RoundRunner,
) -> Result<Probed> {
    let mut probed = Probed::default();
    let mut pending: Vec<&Task> = tasks.iter().collect();
    for r in 0..rounds {
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
        let candidates = not_run_before(&mut probed, sets);
        if candidates.is_empty() {
            break;
        }
        probed.rounds = r + 1;
        let (set_dir, run_dir) = seal_candidates(
            &work.join(format!("round-{r}")),
            candidates.clone(),
            round_opts,
        )?;
        let error = runner
            .run(Round {
                index: r,
                of: rounds,
                tasks: candidates.iter().map(|u| u.task_id.clone()).collect(),
                set_dir: &set_dir,
                run_dir: &run_dir,
            })
            .await?;
        read_round(&mut probed, &candidates, &run_dir, &error)?;
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

/// Of a round's generated `sets`, the configurations not run before (a task with none left
/// is not probed again); the first round's set of each task is kept as its template.
fn not_run_before(probed: &mut Probed, sets: Vec<TaskUnseen>) -> Vec<TaskUnseen> {
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
    candidates
}

/// Each candidate task's probe result from the round's run directory: which configurations
/// the original passed, in which image, on which accelerator.
fn read_round(
    probed: &mut Probed,
    candidates: &[TaskUnseen],
    run_dir: &Path,
    error: &str,
) -> Result<()> {
    let rundir = RunDir::new(run_dir)?;
    for u in candidates {
        let item = Item {
            task_id: u.task_id.clone(),
            repeat: 0,
        };
        let result = rundir.load_result(&item).ok_or_else(|| {
            RunError::Other(format!(
                "{}: the probe has no result (see {}): {error}",
                u.task_id,
                rundir.item_dir(&item).display(),
            ))
        })?;
        let passed = result.unseen.map(|x| x.original_passed).unwrap_or_default();
        if passed.len() != u.configs.len() {
            return Err(RunError::Other(format!(
                "{}: the probe judged {} of {} configurations",
                u.task_id,
                passed.len(),
                u.configs.len()
            )));
        }
        let image = result.probe.map(|p| p.image).unwrap_or_default();
        let device = result.gpu.map(|g| g.kind).unwrap_or_default();
        probed.ran_on.insert(u.task_id.clone(), (image, device));
        probed
            .configs
            .entry(u.task_id.clone())
            .or_default()
            .extend(u.configs.iter().cloned().zip(passed));
    }
    Ok(())
}

/// The sets to seal, each task's passing configurations chosen (`per_task`, the categories in
/// turn), and the probe's record; a task whose original passed none goes to `skipped`.
pub fn chosen(
    probed: Probed,
    per_task: usize,
    image_lock_digest: String,
    skipped: &mut Vec<Skipped>,
) -> (Vec<TaskUnseen>, ProbeRecord) {
    let mut sets = Vec::new();
    let mut record = ProbeRecord {
        image_lock_digest,
        rounds: probed.rounds,
        tasks: Vec::new(),
    };
    for (id, mut template) in probed.template {
        let configs = &probed.configs[&id];
        let picked = choose(configs, per_task);
        let (image, device) = probed.ran_on.get(&id).cloned().unwrap_or_default();
        if picked.is_empty() {
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
        template.configs = picked;
        sets.push(template);
    }
    (sets, record)
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
        let e = work_dir(Path::new("/")).unwrap_err().to_string();
        assert!(e.contains("--out"), "{e}");
    }

    /// A round's configurations are those not run before, and a task's template is its
    /// first round's set with no configurations of its own.
    #[test]
    fn a_round_probes_only_what_no_round_ran() {
        let (sets, _) = sample_sets(7);
        let mut probed = Probed::default();
        let first = not_run_before(&mut probed, sets.clone());
        assert_eq!(first.len(), sets.len());
        for u in &first {
            probed.configs.insert(
                u.task_id.clone(),
                u.configs.iter().map(|c| (c.clone(), true)).collect(),
            );
        }
        assert!(not_run_before(&mut probed, sets).is_empty());
        assert!(probed.template.values().all(|t| t.configs.is_empty()));
    }
}
