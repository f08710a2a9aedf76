//! `arenactl task materialize --aka-root AKA --out OUT [--harnesses DIR] [--no-derive] DIR…`:
//! AgentKernelArena tasks copied with their perf helpers in place (and arena's trusted harness,
//! where DIR has one for the task, else one derived from the task's runner where it has the
//! form arena follows: arena_task::derive), then read back as tasks (so a copy that is still
//! not runnable says why).

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use arena_task::derive::{derive, harness_text, trust_of, TrustLevel};
use arena_task::harness_overlay::{add_harness, add_harness_bytes, harness_for, HARNESS_FILE};
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
    /// The task's family: its type and group under AgentKernelArena's tasks/
    /// (`triton2triton/vllm`), else its type.
    family: String,
    /// The trust a run of the copy gets (`trusted` with its harness, or `self_reported` and why).
    #[serde(skip_serializing_if = "Option::is_none")]
    trust: Option<TrustLevel>,
    /// The copy's task digest (None when it is not a valid task).
    digest: Option<String>,
    /// Why the copy is not a valid task.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<String>,
}

/// A written task read back: the task and its digest, or why it is not a valid task.
fn read_back(dir: &Path, id: &str) -> anyhow::Result<Result<(Task, String), Vec<String>>> {
    Ok(match Task::load(dir, id) {
        Ok(t) => Ok((t, task_digest(dir)?.to_string())),
        Err(e) => Err(e.0.iter().map(|e| e.to_string()).collect()),
    })
}

/// A written task read back: its digest, or (None and) why it is not a valid task.
pub(super) fn digest_or_errors(
    dir: &Path,
    id: &str,
) -> anyhow::Result<(Option<String>, Vec<String>)> {
    Ok(match read_back(dir, id)? {
        Ok((_, digest)) => (Some(digest), Vec::new()),
        Err(errors) => (None, errors),
    })
}

/// The task's path under AKA's tasks/ (`aka_tasks`, canonical), where it lies there.
fn under_aka(aka_tasks: Option<&Path>, f: &FoundTask) -> Option<String> {
    f.dir.canonicalize().ok().and_then(|d| {
        let rel = d.strip_prefix(aka_tasks?).ok()?;
        Some(rel.display().to_string())
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
    let id = under_aka(aka_tasks, f).unwrap_or_else(|| {
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
    derive_harnesses: bool,
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
                None if derive_harnesses => derive_harness(&dst)?,
                None => None,
            };
        let (task, digest, errors) = match read_back(&dst, &f.id)? {
            Ok((t, digest)) => (Some(t), Some(digest), Vec::new()),
            Err(errors) => (None, None, errors),
        };
        let trust = task.as_ref().map(|t| trust_of(&dst, &t.config));
        let family = match (under_aka(aka_tasks.as_deref(), &f), &task) {
            (Some(rel), _) if rel.matches('/').count() >= 2 => {
                rel.splitn(3, '/').take(2).collect::<Vec<_>>().join("/")
            }
            (_, Some(t)) => t.config.task_type.0.clone(),
            _ => "?".to_string(),
        };
        copied.push(Copied {
            id: f.id,
            dir: dst,
            materialized,
            harness,
            family,
            trust,
            digest,
            errors,
        });
    }
    let invalid = copied.iter().filter(|c| c.digest.is_none()).count();
    if json {
        print_json(&copied)?;
    } else {
        print_text(&copied, out, invalid);
    }
    Ok(if invalid > 0 {
        Outcome::Invalid
    } else {
        Outcome::Ok
    })
}

/// A trusted harness derived from the task copy's own runner, where it has the form the
/// evaluator follows (arena_task::derive); None (the copy stays self-reported) otherwise.
fn derive_harness(dst: &Path) -> anyhow::Result<Option<String>> {
    let config = dst.join(arena_task::CONFIG_FILE);
    let Ok(text) = std::fs::read_to_string(&config) else {
        return Ok(None);
    };
    let Ok(parsed) = arena_task::TaskConfig::parse(&config, &text) else {
        return Ok(None);
    };
    if parsed.trusted_harness.is_some() {
        return Ok(None);
    }
    match derive(dst, &parsed) {
        Ok(d) => {
            add_harness_bytes(dst, harness_text(&d).as_bytes())?;
            Ok(Some(HARNESS_FILE.to_string()))
        }
        Err(_) => Ok(None),
    }
}

fn print_text(copied: &[Copied], out: &Path, invalid: usize) {
    for c in copied {
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
    print_trust(copied);
}

/// Per family: how many copies a run trusts, by harness, and how many stay self-reported.
fn print_trust(copied: &[Copied]) {
    let mut families: BTreeMap<&str, BTreeMap<String, usize>> = BTreeMap::new();
    for c in copied {
        let key = match &c.trust {
            Some(t) => match t.harness {
                Some(h) => format!("trusted ({})", h.as_str()),
                None => t.level.to_string(),
            },
            None => "invalid".to_string(),
        };
        *families
            .entry(&c.family)
            .or_default()
            .entry(key)
            .or_default() += 1;
    }
    for (family, counts) in families {
        let total: usize = counts.values().sum();
        let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        println!("  {family}: {total} tasks: {}", parts.join(", "));
    }
}
