//! `arenactl task list` and the task verbs' dispatch (`show` in task_show.rs, `validate`
//! and `digest` in task_check.rs, `materialize` and `import` in files of their own).

use std::path::PathBuf;

use arena_task::derive::{trust_of, TrustLevel};
use arena_task::Task;
use serde::Serialize;

use super::task_check::{find_all, Found};
use super::task_show::trust_text;
use super::{print_json, Outcome};
use crate::cli::TaskCommand;

pub fn run(cmd: TaskCommand) -> anyhow::Result<Outcome> {
    match cmd {
        TaskCommand::List { dirs, out } => list(&dirs, out.json),
        TaskCommand::Show { id, root, out } => super::task_show::show(&id, &root, out.json),
        TaskCommand::Validate { dirs, out } => super::task_check::validate(&dirs, out.json),
        TaskCommand::Digest { dirs, out } => super::task_check::digest(&dirs, out.json),
        TaskCommand::Materialize {
            aka_root,
            out,
            harnesses,
            no_derive,
            dirs,
            json,
        } => super::materialize::run(
            &aka_root,
            &out,
            harnesses.as_deref(),
            !no_derive,
            &dirs,
            json.json,
        ),
        TaskCommand::Import {
            format: crate::cli::ImportFormat::Kernelbench,
            dir,
            out,
            json,
        } => super::import::kernelbench(&dir, &out, json.json),
    }
}

#[derive(Serialize)]
struct ListEntry {
    id: String,
    dir: PathBuf,
    task_type: Option<String>,
    source_files: usize,
    /// The trust a run of the task gets (arena_task::derive::trust_of).
    #[serde(skip_serializing_if = "Option::is_none")]
    trust: Option<TrustLevel>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn list(dirs: &[PathBuf], json: bool) -> anyhow::Result<Outcome> {
    let mut entries = Vec::new();
    let mut outcome = Outcome::Ok;
    for (dir, found) in find_all(dirs).0 {
        match found {
            Found::Error(e) => {
                outcome = Outcome::Invalid;
                entries.push(ListEntry {
                    id: String::new(),
                    dir,
                    task_type: None,
                    source_files: 0,
                    trust: None,
                    error: Some(e),
                });
            }
            Found::Tasks(tasks) => {
                for t in tasks {
                    let loaded = Task::load(&t.dir, &t.id);
                    if loaded.is_err() {
                        outcome = Outcome::Invalid;
                    }
                    entries.push(match loaded {
                        Ok(task) => ListEntry {
                            id: t.id,
                            dir: t.dir,
                            trust: Some(trust_of(&task.dir, &task.config)),
                            task_type: Some(task.config.task_type.0),
                            source_files: task.config.source_file_path.len(),
                            error: None,
                        },
                        Err(e) => ListEntry {
                            id: t.id,
                            dir: t.dir,
                            task_type: None,
                            source_files: 0,
                            trust: None,
                            error: Some(
                                e.0.len().to_string() + " error(s); run `arenactl task validate`",
                            ),
                        },
                    });
                }
            }
        }
    }
    if json {
        print_json(&entries)?;
    } else {
        let w = entries.iter().map(|e| e.id.len()).max().unwrap_or(0).max(2);
        println!("{:<w$}  {:<16}  SOURCES  TRUST", "ID", "TYPE");
        for e in &entries {
            match &e.error {
                None => println!(
                    "{:<w$}  {:<16}  {:<7}  {}",
                    e.id,
                    e.task_type.as_deref().unwrap_or(""),
                    e.source_files,
                    e.trust.as_ref().map(trust_text).unwrap_or_default()
                ),
                Some(err) if e.id.is_empty() => eprintln!("error: {err}"),
                Some(err) => println!("{:<w$}  {:<16}  invalid: {err}", e.id, "?"),
            }
        }
    }
    Ok(outcome)
}
