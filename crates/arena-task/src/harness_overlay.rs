//! arena's trusted harnesses for tasks that come without one. An AgentKernelArena task times
//! itself (its runner, its perf helpers, in the kernel's own process); arena ships, for some
//! of them, a trusted harness (`tasks/aka-harnesses/<task id>.py`: the kernel's file and
//! entry, the visible shapes, inputs from a seed, a reference and a check), so that arena's
//! evaluator can make the inputs, time the kernel from outside and check every output.
//! `arenactl task materialize --harnesses DIR` puts the harness into the copy and names it in
//! the copy's config.yaml; the task's own commands stay as they are (the agent still runs
//! them), and the task's digest covers the harness.

use std::path::{Path, PathBuf};

use crate::error::TaskError;
use crate::CONFIG_FILE;

/// The harness's name inside the task.
pub const HARNESS_FILE: &str = "arena_harness.py";

/// The harness `dir` holds for task `id` (`<dir>/<id>.py`), if any.
pub fn harness_for(dir: &Path, id: &str) -> Option<PathBuf> {
    let p = dir.join(format!("{id}.py"));
    p.is_file().then_some(p)
}

/// Puts `harness` into the task copy `task` as [`HARNESS_FILE`] and names it in the copy's
/// config.yaml (`trusted_harness`), appended as one line so that the task's own text stays
/// as it was. A task that already names a trusted harness, or has a file of that name, is
/// refused: nothing is overwritten.
pub fn add_harness(task: &Path, harness: &Path) -> Result<(), TaskError> {
    let text = std::fs::read(harness).map_err(|e| TaskError::io(harness, e))?;
    add_harness_bytes(task, &text)
}

/// [`add_harness`] with the harness's bytes (a derived harness, written by arena).
pub fn add_harness_bytes(task: &Path, harness: &[u8]) -> Result<(), TaskError> {
    let config = task.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&config).map_err(|e| TaskError::io(&config, e))?;
    let parsed: serde_norway::Value =
        serde_norway::from_str(&text).map_err(|e| TaskError::Syntax {
            file: config.clone(),
            message: e.to_string(),
        })?;
    if let Some(v) = parsed.get("trusted_harness") {
        return Err(TaskError::field(
            &config,
            "trusted_harness",
            format!("already names a trusted harness ({v:?}); arena's would replace it"),
        ));
    }
    let dst = task.join(HARNESS_FILE);
    if dst.exists() {
        return Err(TaskError::field(
            &dst,
            "trusted_harness",
            "the task already has a file of this name; arena's harness would replace it",
        ));
    }
    std::fs::write(&dst, harness).map_err(|e| TaskError::io(&dst, e))?;
    let sep = if text.ends_with('\n') || text.is_empty() {
        ""
    } else {
        "\n"
    };
    let line = format!(
        "{sep}# arena's trusted harness ({HARNESS_FILE}): arena's evaluator times the kernel from outside\ntrusted_harness: {HARNESS_FILE}\n"
    );
    std::fs::write(&config, format!("{text}{line}")).map_err(|e| TaskError::io(&config, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(config: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(CONFIG_FILE), config).unwrap();
        d
    }

    fn harness() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("h.py");
        std::fs::write(&p, "SOURCE = 'k.py'\n").unwrap();
        (d, p)
    }

    #[test]
    fn the_harness_is_copied_in_and_named_by_one_appended_line() {
        let t = task("task_type: triton2triton\nsource_file_path: [k.py]");
        let (_h, h) = harness();
        add_harness(t.path(), &h).unwrap();
        let config = std::fs::read_to_string(t.path().join(CONFIG_FILE)).unwrap();
        assert!(config.starts_with("task_type: triton2triton\nsource_file_path: [k.py]\n# arena"));
        let v: serde_norway::Value = serde_norway::from_str(&config).unwrap();
        assert_eq!(v["trusted_harness"].as_str(), Some(HARNESS_FILE));
        assert_eq!(
            std::fs::read_to_string(t.path().join(HARNESS_FILE)).unwrap(),
            "SOURCE = 'k.py'\n"
        );
    }

    #[test]
    fn a_task_with_a_harness_or_a_file_of_its_name_is_refused_and_left_as_it_was() {
        let (_h, h) = harness();
        let named = task("task_type: triton2triton\ntrusted_harness: scripts/t.py\n");
        let e = add_harness(named.path(), &h).unwrap_err().to_string();
        assert!(
            e.contains("config.yaml: trusted_harness: already names"),
            "{e}"
        );
        assert!(!named.path().join(HARNESS_FILE).exists());

        let clash = task("task_type: triton2triton\n");
        std::fs::write(clash.path().join(HARNESS_FILE), "mine").unwrap();
        let e = add_harness(clash.path(), &h).unwrap_err().to_string();
        assert!(
            e.contains("arena_harness.py: trusted_harness: the task already has"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(clash.path().join(CONFIG_FILE)).unwrap(),
            "task_type: triton2triton\n"
        );
    }

    #[test]
    fn harnesses_are_found_by_task_id() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("triton2triton/vllm")).unwrap();
        std::fs::write(d.path().join("triton2triton/vllm/triton_expand.py"), "").unwrap();
        assert!(harness_for(d.path(), "triton2triton/vllm/triton_expand").is_some());
        assert!(harness_for(d.path(), "triton2triton/vllm/triton_bincount").is_none());
    }
}
