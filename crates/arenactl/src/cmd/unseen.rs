//! `arenactl unseen generate|digest|eval`.

use arena_task::hidden::{verify_set, write_set};
use arena_task::unseen::GenOptions;
use arena_task::{discover, Task};

use super::{print_json, Outcome};
use crate::cli::UnseenCommand;

pub fn run(cmd: UnseenCommand) -> anyhow::Result<Outcome> {
    match cmd {
        UnseenCommand::Generate {
            tasks,
            seed,
            out,
            per_task,
            memory_budget_gib,
            max_scale,
            json,
        } => {
            let mut loaded = Vec::new();
            for dir in &tasks {
                for f in discover(dir)? {
                    loaded.push(Task::load(&f.dir, &f.id).map_err(|e| anyhow::anyhow!("{e}"))?);
                }
            }
            let opts = GenOptions {
                seed,
                per_task,
                memory_budget: memory_budget_gib << 30,
                max_scale,
            };
            let m = write_set(&loaded, opts, &out)?;
            for s in &m.skipped {
                eprintln!("warning: {}: skipped: {}", s.task_id, s.reason);
            }
            if json.json {
                print_json(&m)?;
            } else {
                println!(
                    "{}  {} ({} tasks, {} skipped)",
                    m.set_digest,
                    out.display(),
                    m.files.len(),
                    m.skipped.len()
                );
            }
            Ok(Outcome::Ok)
        }
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
