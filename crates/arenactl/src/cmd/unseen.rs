//! `arenactl unseen generate|digest|eval`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context;
use arena_task::hidden::{
    find_declaration, verify_set, write_set_with, Manifest, SkipKind, Skipped, TaskUnseen,
};
use arena_task::unseen::{no_room, Category, GenOptions, CATEGORIES};
use arena_task::{discover_all, Task};

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
    let found = discover_all(&args.tasks)?;
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
    let room: BTreeMap<String, Vec<(Category, String)>> = loaded
        .iter()
        .filter_map(|t| {
            let d = find_declaration(t).ok()?;
            Some((t.id.to_string(), no_room(&d.entries, &d.hints)))
        })
        .collect();
    let cov = coverage(&m, out, found.len(), &room)?;
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
             cover all {} categories, {} every category their rules leave room for",
            cov.with_set,
            cov.tasks,
            cov.no_declaration,
            cov.agent_owned,
            cov.failed,
            cov.all_categories,
            cov.with_set,
            CATEGORIES.len(),
            cov.all_with_room
        );
        for (task, missing) in &cov.missing {
            for m in missing {
                println!(
                    "  {task}: no {}: {}",
                    m.category,
                    m.no_room.as_deref().unwrap_or("not made (room was left)")
                );
            }
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
    /// Sets lacking no category but those their rules leave no room for.
    all_with_room: usize,
    categories: BTreeMap<String, Vec<&'static str>>,
    /// The categories each set lacks, and why where its rules leave no room.
    missing: BTreeMap<String, Vec<Missing>>,
}

#[derive(serde::Serialize)]
struct Missing {
    category: &'static str,
    /// Why the rules leave no room for it; None where they do and none was made.
    no_room: Option<String>,
}

fn coverage(
    m: &Manifest,
    out: &Path,
    tasks: usize,
    room: &BTreeMap<String, Vec<(Category, String)>>,
) -> anyhow::Result<Coverage> {
    let mut categories = BTreeMap::new();
    let mut missing = BTreeMap::new();
    for f in &m.files {
        let p = out.join(&f.file);
        let u: TaskUnseen = serde_json::from_slice(
            &std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?,
        )?;
        let cats: BTreeSet<&'static str> = u.configs.iter().map(|c| c.category.as_str()).collect();
        let lacks: Vec<Missing> = CATEGORIES
            .iter()
            .filter(|c| !cats.contains(c.as_str()))
            .map(|c| Missing {
                category: c.as_str(),
                no_room: room
                    .get(&f.task_id)
                    .and_then(|r| r.iter().find(|(rc, _)| rc == c))
                    .map(|(_, why)| why.clone()),
            })
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
        all_with_room: m.files.len()
            - missing
                .values()
                .filter(|l| l.iter().any(|x| x.no_room.is_none()))
                .count(),
        categories,
        missing,
    })
}
