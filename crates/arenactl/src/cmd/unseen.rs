//! `arenactl unseen generate|digest|eval`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use arena_task::hidden::{verify_set, write_set_with, Manifest, SkipKind, Skipped, TaskUnseen};
use arena_task::unseen::{GenOptions, CATEGORIES};
use arena_task::{discover_all_canonical, Task};

use super::{print_json, Outcome};
use crate::cli::{UnseenCommand, UnseenGenerateArgs};

pub fn run(cmd: UnseenCommand) -> anyhow::Result<Outcome> {
    match cmd {
        UnseenCommand::Generate(args) => generate(*args),
        UnseenCommand::Eval(args) => super::run::unseen_eval(*args),
        UnseenCommand::Digest { dir, json } => {
            let m = verify_set(&dir)?;
            if json.json {
                print_json(
                    &serde_json::json!({"set_digest": m.set_digest, "tasks": m.files.len(), "skipped": m.skipped}),
                )?;
            } else {
                println!("{}  {}", m.set_digest, dir.display());
            }
            Ok(Outcome::Ok)
        }
    }
}

/// `arenactl unseen generate`: every task found gets a set or a named reason; a task that
/// cannot be read never stops the others (exit code 3 says the set is partial). With
/// `--probe`, only configurations the original kernel passed are sealed.
fn generate(args: UnseenGenerateArgs) -> anyhow::Result<Outcome> {
    let opts = GenOptions {
        seed: args.seed,
        per_task: args.per_task,
        memory_budget: args.memory_budget_gib << 30,
        max_scale: args.max_scale,
        first_label: 0,
    };
    let (out, json) = (&args.out, args.json.json);
    let mut loaded = Vec::new();
    let mut refused = Vec::new();
    // Ids as a lockfile records them, whichever directory of the tree was named.
    let found = discover_all_canonical(&args.task_dirs())?;
    super::task_check::warn_skipped(&found.skipped);
    let found = found.tasks;
    for f in &found {
        match Task::load(&f.dir, &f.id) {
            Ok(t) => loaded.push(t),
            Err(e) => refused.push(Skipped {
                task_id: f.id.clone(),
                reason: e.to_string(),
                kind: Some(SkipKind::InvalidTask),
            }),
        }
    }
    let m = match &args.probe {
        Some(lock) => super::unseen_probe::probed_set(&loaded, refused, opts, lock, &args)?,
        None => write_set_with(&loaded, refused, opts, out)?,
    };
    let cov = coverage(&m, out, found.len())?;
    for s in &m.skipped {
        eprintln!("warning: {}: skipped: {}", s.task_id, s.reason);
    }
    if json {
        let mut v = serde_json::to_value(&m)?;
        v["coverage"] = serde_json::to_value(&cov)?;
        print_json(&v)?;
    } else {
        println!(
            "{}  {} ({} tasks, {} skipped)",
            m.set_digest,
            out.display(),
            m.files.len(),
            m.skipped.len()
        );
        println!(
            "coverage: {} of {} tasks have a set ({} declare no shapes, {} declare them only \
             where the agent writes, {} could not be read, generated or run); {} of {} sets \
             cover all {} categories",
            cov.with_set,
            cov.tasks,
            cov.no_declaration,
            cov.agent_owned,
            cov.failed,
            cov.all_categories,
            cov.with_set,
            CATEGORIES.len(),
        );
        for (task, missing) in &cov.missing {
            println!("  {task}: no {}", missing.join(", "));
        }
        if cov.breaks_tie > 0 {
            println!(
                "{} asymmetric configurations break a tie every visible configuration has (a \
                 cube): `--probe` keeps each only where the original kernel passes it",
                cov.breaks_tie
            );
        }
        if let Some(p) = &m.probe {
            let probed: usize = p.tasks.iter().map(|t| t.probed).sum();
            let passed: usize = p.tasks.iter().map(|t| t.passed).sum();
            println!(
                "probe: the original kernel passed {passed} of {probed} candidate configurations \
                 in {} round(s); every sealed configuration is one it passed",
                p.rounds
            );
        }
    }
    Ok(if cov.failed > 0 {
        Outcome::Partial
    } else {
        Outcome::Ok
    })
}

/// What a set covers: tasks with configurations, why the others have none, and the
/// categories each set's configurations fall in.
#[derive(serde::Serialize)]
struct Coverage {
    tasks: usize,
    with_set: usize,
    no_declaration: usize,
    /// Declared only in files the agent edits.
    agent_owned: usize,
    failed: usize,
    all_categories: usize,
    categories: BTreeMap<String, Vec<&'static str>>,
    /// The categories each set lacks (a probe drops what the original fails; a budget can
    /// leave a category without a configuration that fits).
    missing: BTreeMap<String, Vec<&'static str>>,
    /// Configurations that break a cube's tie (`breaks_tie`).
    breaks_tie: usize,
}

fn coverage(m: &Manifest, out: &Path, tasks: usize) -> anyhow::Result<Coverage> {
    let mut categories = BTreeMap::new();
    let mut missing = BTreeMap::new();
    let mut breaks_tie = 0;
    for f in &m.files {
        let u: TaskUnseen = arena_task::hidden::read_task_set(&out.join(&f.file), &f.task_id)?;
        let cats: BTreeSet<&'static str> = u.configs.iter().map(|c| c.category.as_str()).collect();
        breaks_tie += u.configs.iter().filter(|c| c.breaks_tie.is_some()).count();
        let lacks: Vec<&'static str> = CATEGORIES
            .iter()
            .map(|c| c.as_str())
            .filter(|c| !cats.contains(c))
            .collect();
        if !lacks.is_empty() {
            missing.insert(f.task_id.clone(), lacks);
        }
        categories.insert(f.task_id.clone(), cats.into_iter().collect::<Vec<_>>());
    }
    let failed = m
        .skipped
        .iter()
        .filter(|s| s.kind.is_none_or(|k| k.is_failure()))
        .count();
    let agent_owned = m
        .skipped
        .iter()
        .filter(|s| s.kind == Some(SkipKind::AgentOwned))
        .count();
    Ok(Coverage {
        tasks,
        with_set: m.files.len(),
        no_declaration: m.skipped.len() - failed - agent_owned,
        agent_owned,
        failed,
        all_categories: categories
            .values()
            .filter(|c: &&Vec<&str>| c.len() == CATEGORIES.len())
            .count(),
        categories,
        missing,
        breaks_tie,
    })
}
