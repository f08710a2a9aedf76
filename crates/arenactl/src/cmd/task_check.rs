//! `arenactl task validate|digest`: whether each task below the directories loads, and each
//! task's digest.

use std::path::PathBuf;

use arena_task::{discover_canonical, task_digest, FoundTask, Task};
use serde::Serialize;

use super::{print_json, Outcome};

/// The outcome of reading one directory argument: its tasks, or why none could be found.
pub(super) enum Found {
    Tasks(Vec<FoundTask>),
    Error(String),
}

/// The tasks below each directory, with canonical ids (arena_task::canonical), and the
/// directories below them that hold no task, each warned about on stderr here.
pub(super) fn find_all(dirs: &[PathBuf]) -> (Vec<(PathBuf, Found)>, Vec<PathBuf>) {
    let mut skipped = Vec::new();
    let found = dirs
        .iter()
        .map(|d| {
            let f = match discover_canonical(d) {
                Ok(t) => {
                    skipped.extend(t.skipped);
                    Found::Tasks(t.tasks)
                }
                Err(e) => Found::Error(e.to_string()),
            };
            (d.clone(), f)
        })
        .collect();
    warn_skipped(&skipped);
    (found, skipped)
}

/// A warning per directory that holds no task: a task whose config.yaml is missing or
/// misnamed would otherwise be left out without a word.
pub(super) fn warn_skipped(skipped: &[PathBuf]) {
    for d in skipped {
        eprintln!(
            "warning: {}: no {} here or below: skipped",
            d.display(),
            arena_task::CONFIG_FILE
        );
    }
}

#[derive(Serialize)]
struct ValidateEntry {
    id: Option<String>,
    dir: PathBuf,
    valid: bool,
    task_type: Option<String>,
    errors: Vec<String>,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct ValidateOutput {
    valid: usize,
    invalid: usize,
    tasks: Vec<ValidateEntry>,
    /// Directories below those given that hold no task.
    skipped: Vec<PathBuf>,
}

pub(super) fn validate(dirs: &[PathBuf], json: bool) -> anyhow::Result<Outcome> {
    let mut entries = Vec::new();
    let (found, skipped) = find_all(dirs);
    for (dir, found) in found {
        match found {
            Found::Error(e) => entries.push(ValidateEntry {
                id: None,
                dir,
                valid: false,
                task_type: None,
                errors: vec![e],
                warnings: Vec::new(),
            }),
            Found::Tasks(tasks) => {
                for t in tasks {
                    entries.push(match Task::load(&t.dir, &t.id) {
                        Ok(task) => ValidateEntry {
                            id: Some(t.id),
                            dir: t.dir,
                            valid: true,
                            task_type: Some(task.config.task_type.0),
                            errors: Vec::new(),
                            warnings: task.warnings,
                        },
                        Err(errs) => ValidateEntry {
                            id: Some(t.id),
                            dir: t.dir,
                            valid: false,
                            task_type: None,
                            errors: errs.0.iter().map(|e| e.to_string()).collect(),
                            warnings: Vec::new(),
                        },
                    });
                }
            }
        }
    }
    let invalid = entries.iter().filter(|e| !e.valid).count();
    let out = ValidateOutput {
        valid: entries.len() - invalid,
        invalid,
        tasks: entries,
        skipped,
    };
    if json {
        print_json(&out)?;
    } else {
        for e in &out.tasks {
            let name = e.id.clone().unwrap_or_else(|| e.dir.display().to_string());
            if e.valid {
                println!("ok       {name}");
            } else {
                println!("INVALID  {name}");
            }
            for err in &e.errors {
                eprintln!("error: {err}");
            }
            for w in &e.warnings {
                eprintln!("warning: {w}");
            }
        }
        println!("{} valid, {} invalid", out.valid, out.invalid);
    }
    Ok(if invalid == 0 {
        Outcome::Ok
    } else {
        Outcome::Invalid
    })
}

#[derive(Serialize)]
struct DigestEntry {
    id: String,
    dir: PathBuf,
    digest: String,
}

pub(super) fn digest(dirs: &[PathBuf], json: bool) -> anyhow::Result<Outcome> {
    let mut entries = Vec::new();
    for dir in dirs {
        let found = discover_canonical(dir)?;
        warn_skipped(&found.skipped);
        for t in found.tasks {
            let digest = task_digest(&t.dir)?;
            entries.push(DigestEntry {
                id: t.id,
                dir: t.dir,
                digest: digest.to_string(),
            });
        }
    }
    if json {
        print_json(&entries)?;
    } else {
        for e in &entries {
            println!("{}  {}", e.digest, e.id);
        }
    }
    Ok(Outcome::Ok)
}
