//! `arenactl task show`: one task's configuration, trust and digest.

use std::path::Path;

use anyhow::Context;
use arena_task::derive::{trust_of, TrustLevel};
use arena_task::{discover, task_digest, FoundTask, Task, TaskErrors};
use serde::Serialize;

use super::{print_json, Outcome};

/// Finds a task by directory path, or by id under the tasks root.
fn locate(id: &str, root: &Path) -> anyhow::Result<FoundTask> {
    let as_path = Path::new(id);
    if as_path.join(arena_task::CONFIG_FILE).is_file() {
        // Its id as `task list` prints it, whatever path names it.
        let found = arena_task::discover_canonical(as_path)?;
        return Ok(found
            .tasks
            .into_iter()
            .next()
            .expect("a task dir yields one task"));
    }
    let tasks = discover(root).with_context(|| {
        format!("looking for task `{id}` (pass its directory, or --root for the tasks root)")
    })?;
    tasks
        .into_iter()
        .find(|t| t.id == id.trim_end_matches('/'))
        .map(|t| FoundTask {
            // Found by its id under --root; shown by its id in its set, as `task list` shows it.
            id: arena_task::canonical::canonical_id(&t.dir).unwrap_or(t.id),
            dir: t.dir,
        })
        .ok_or_else(|| {
            arena_task::TaskError::UnknownTask {
                id: id.to_string(),
                root: root.to_path_buf(),
            }
            .into()
        })
}

#[derive(Serialize)]
struct ShowOutput<'a> {
    #[serde(flatten)]
    task: &'a Task,
    digest: String,
    trust: TrustLevel,
}

/// `trusted (derived)`, or `self_reported: <why>`.
pub(super) fn trust_text(t: &TrustLevel) -> String {
    match (t.harness, &t.reason) {
        (Some(h), _) => format!("{} ({})", t.level, h.as_str()),
        (None, Some(r)) => format!("{}: {r}", t.level),
        (None, None) => t.level.to_string(),
    }
}

pub(super) fn show(id: &str, root: &Path, json: bool) -> anyhow::Result<Outcome> {
    let found = locate(id, root)?;
    let task = Task::load(&found.dir, &found.id).map_err(errors_to_anyhow)?;
    let digest = task_digest(&task.dir)?;
    if json {
        print_json(&ShowOutput {
            task: &task,
            digest: digest.to_string(),
            trust: trust_of(&task.dir, &task.config),
        })?;
        return Ok(Outcome::Ok);
    }
    print!("{}", show_text(&task, &digest.to_string()));
    for w in &task.warnings {
        eprintln!("warning: {w}");
    }
    Ok(Outcome::Ok)
}

/// Every field the task sets, in full: lists joined, multi-line texts (instructions, the
/// prompt's source code and cheatsheet) indented below their name, JSON values as JSON, and
/// the names of fields arena does not know. Empty fields are left out.
fn show_text(task: &Task, digest: &str) -> String {
    let c = &task.config;
    let mut out = String::new();
    let mut line = |name: &str, value: String| {
        if value.is_empty() {
            return;
        }
        let label = format!("{name}:");
        if value.contains('\n') {
            out.push_str(&label);
            out.push('\n');
            for l in value.trim_end().lines() {
                out.push_str(&format!("    {l}\n"));
            }
        } else {
            out.push_str(&format!("{label:<21}{value}\n"));
        }
    };
    let list = |v: &[String]| v.join(", ");
    let opt = |v: &Option<String>| v.clone().unwrap_or_default();
    let json =
        |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string()).unwrap_or_default();
    let secs = |v: Option<f64>| v.map(|t| format!("{t} s")).unwrap_or_default();
    line("id", task.id.to_string());
    line("directory", task.dir.display().to_string());
    line("task type", c.task_type.to_string());
    line("digest", digest.to_string());
    line("source files", list(&c.source_file_path));
    line("target files", list(&c.target_file_path));
    line("agent's files", list(&task.agent_files));
    line("target kernels", list(&c.target_kernel_functions));
    line("harness", opt(&c.harness_path));
    line("trusted harness", opt(&c.trusted_harness));
    line("trust", trust_text(&trust_of(&task.dir, c)));
    line("compile", c.compile_command.join(" && "));
    line("correctness", c.correctness_command.join(" && "));
    line("performance", c.performance_command.join(" && "));
    line("compile timeout", secs(c.compile_timeout));
    line("correctness timeout", secs(c.correctness_timeout));
    line("performance timeout", secs(c.performance_timeout));
    line(
        "memory limit",
        c.memory_limit
            .map(|b| format!("{b} bytes"))
            .unwrap_or_default(),
    );
    line("result template", json(&c.task_result_template));
    line("repository language", opt(&c.repository_language));
    line("repo url", opt(&c.repo_url));
    line("repo subdir", opt(&c.repo_subdir));
    line("post-clone install", list(&c.post_clone_install));
    line("post-clone mode", opt(&c.post_clone_install_mode));
    line("platform support", json(&c.platform_support));
    line("supported archs", list(&c.supported_archs));
    line("kernel identity", json(&c.kernel_identity));
    line("source origin", json(&c.source_origin));
    line("editable sources", list(&c.editable_sources));
    line("image repo path", opt(&c.image_repo_path));
    line("image repo exclude", list(&c.image_repo_exclude));
    line("prompt task type", opt(&c.prompt.task_type));
    line("instructions", opt(&c.prompt.instructions));
    line("source code", opt(&c.prompt.source_code));
    line("cheatsheet", opt(&c.prompt.cheatsheet));
    let unknown: Vec<String> = c
        .unknown
        .keys()
        .cloned()
        .chain(c.prompt.unknown.keys().map(|k| format!("prompt.{k}")))
        .collect();
    line("unknown fields", list(&unknown));
    out
}

fn errors_to_anyhow(e: TaskErrors) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}
