//! `arenactl task materialize --aka-root AKA --out OUT [--harnesses DIR] DIR…`: AgentKernelArena
//! tasks copied with their perf helpers in place (and arena's trusted harness, where DIR has
//! one for the task), then read back as tasks (so a copy that is still not runnable says why).

use std::path::{Path, PathBuf};

use arena_task::harness_overlay::{add_harness, harness_for, HARNESS_FILE};
use arena_task::helpers::{copy_task, materialize, PerfHelpers};
use arena_task::{discover_all, task_digest, FoundTask, Task};

use super::{print_json, Outcome};

#[derive(serde::Serialize)]
struct Copied {
    id: String,
    dir: PathBuf,
    /// Files the helpers were put into, relative to the task.
    materialized: Vec<String>,
    /// arena's trusted harness put in (its path in the task), where `--harnesses` had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    harness: Option<String>,
    /// The copy's task digest (None when it is not a valid task).
    digest: Option<String>,
    /// Why the copy is not a valid task.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<String>,
}

/// A written task read back: its digest, or (None and) why it is not a valid task.
pub(super) fn digest_or_errors(
    dir: &Path,
    id: &str,
) -> anyhow::Result<(Option<String>, Vec<String>)> {
    Ok(match Task::load(dir, id) {
        Ok(_) => (Some(task_digest(dir)?.to_string()), Vec::new()),
        Err(e) => (None, e.0.iter().map(|e| e.to_string()).collect()),
    })
}

/// The harness `harnesses` holds for task `f`. Harnesses are named by the task's path under
/// AKA's tasks/ (`aka_tasks`, canonical: the id AKA gives it), whichever directory the task
/// was given as; a task outside it is looked up by its id here, with a warning.
fn harness_of(
    harnesses: &Path,
    aka_root: &Path,
    aka_tasks: Option<&Path>,
    f: &FoundTask,
) -> Option<PathBuf> {
    let under = f.dir.canonicalize().ok().and_then(|d| {
        let rel = d.strip_prefix(aka_tasks?).ok()?;
        Some(rel.display().to_string())
    });
    let id = under.unwrap_or_else(|| {
        eprintln!(
            "warning: {}: not under {}: its harness is looked up as `{}.py`",
            f.dir.display(),
            aka_root.join("tasks").display(),
            f.id
        );
        f.id.clone()
    });
    harness_for(harnesses, &id)
}

pub fn run(
    aka_root: &Path,
    out: &Path,
    harnesses: Option<&Path>,
    dirs: &[PathBuf],
    json: bool,
) -> anyhow::Result<Outcome> {
    let helpers = PerfHelpers::load(aka_root)?;
    if let Some(h) = harnesses.filter(|h| !h.is_dir()) {
        anyhow::bail!("--harnesses {}: not a directory", h.display());
    }
    if out.exists() && std::fs::read_dir(out)?.next().is_some() {
        anyhow::bail!(
            "{}: not empty: the copies go into a new directory (nothing is overwritten)",
            out.display()
        );
    }
    let aka_tasks = aka_root.join("tasks").canonicalize().ok();
    let mut copied = Vec::new();
    for f in discover_all(dirs)? {
        let dst = out.join(&f.id);
        copy_task(&f.dir, &dst)?;
        let changed = materialize(&dst, &helpers)?;
        let materialized = changed
            .iter()
            .map(|p| p.strip_prefix(&dst).unwrap_or(p).display().to_string())
            .collect();
        let harness =
            match harnesses.and_then(|h| harness_of(h, aka_root, aka_tasks.as_deref(), &f)) {
                Some(h) => {
                    add_harness(&dst, &h)?;
                    Some(HARNESS_FILE.to_string())
                }
                None => None,
            };
        let (digest, errors) = digest_or_errors(&dst, &f.id)?;
        copied.push(Copied {
            id: f.id,
            dir: dst,
            materialized,
            harness,
            digest,
            errors,
        });
    }
    let invalid = copied.iter().filter(|c| c.digest.is_none()).count();
    if json {
        print_json(&copied)?;
    } else {
        for c in &copied {
            let harness = match &c.harness {
                Some(h) => format!("; arena's trusted harness in {h}"),
                None => String::new(),
            };
            match &c.digest {
                Some(d) if c.materialized.is_empty() => {
                    println!("{d}  {}  (no helpers needed{harness})", c.id)
                }
                Some(d) => println!(
                    "{d}  {}  (helpers in {}{harness})",
                    c.id,
                    c.materialized.join(", ")
                ),
                None => {
                    println!("INVALID  {}", c.id);
                    for e in &c.errors {
                        println!("  error: {e}");
                    }
                }
            }
        }
        println!(
            "{} tasks copied to {}; {} with helpers put in, {} with arena's trusted harness; {invalid} not valid tasks",
            copied.len(),
            out.display(),
            copied.iter().filter(|c| !c.materialized.is_empty()).count(),
            copied.iter().filter(|c| c.harness.is_some()).count()
        );
    }
    Ok(if invalid > 0 {
        Outcome::Invalid
    } else {
        Outcome::Ok
    })
}
