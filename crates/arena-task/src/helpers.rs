//! AgentKernelArena's perf helpers. AKA's task sources keep stubs where its timing helpers go
//! (rocmbench tasks: a `performance_utils_pytest.py` that raises; vLLM and image_kernel task
//! runners: a region between `AKA-GENERATED` markers whose functions raise), and AKA replaces
//! them in `setup_workspace()` from its `src/tools/perf/`. arena does the same once, ahead of
//! time (`arenactl task materialize`), so that the task's digest — and its image's — covers the
//! helpers it runs with; a task still holding a stub is refused when it is read.
//!
//! The output is byte-identical to AKA's `materialize_perf_helpers_in_workspace`.

use std::path::{Path, PathBuf};

use crate::error::TaskError;

const MARK_START: &str = "# >>> AKA-GENERATED: shared CUDA-graph benchmark helpers - edit src/tools/perf/vllm_cuda_graph_block.py then run `make sync-perf-helpers` >>>";
const MARK_STARTS: [&str; 3] = [
    MARK_START,
    "# >>> AKA-GENERATED: shared CUDA-graph benchmark helpers - edit tools/perf/vllm_cuda_graph_block.py then run `make sync-perf-helpers` >>>",
    "# >>> AKA-GENERATED: shared CUDA-graph benchmark helpers \u{2014} edit tools/perf/vllm_cuda_graph_block.py then run `make sync-perf-helpers` >>>",
];
const MARK_END: &str = "# <<< AKA-GENERATED <<<";
const FUNC_ANCHOR: &str = "def _measure_cuda_event_fallback(fn, repetition):";
const VLLM_SYMBOLS: [&str; 2] = [
    "_measure_cuda_event_fallback",
    "_benchmark_cuda_graph_or_events",
];
const ROCMBENCH_HELPER: &str = "performance_utils_pytest.py";
const RUNNER: &str = "scripts/task_runner.py";
/// What AKA's stubs say when they are run; a file saying it was never materialized.
const STUB_SIGNS: [&str; 2] = [
    "is a generated stub in task sources",
    "CUDA-graph benchmark helpers were not materialized",
];

/// The canonical helpers, from an AgentKernelArena checkout.
#[derive(Debug, Clone)]
pub struct PerfHelpers {
    rocmbench: String,
    vllm_block: String,
}

fn read(p: &Path) -> Result<String, TaskError> {
    std::fs::read_to_string(p).map_err(|e| TaskError::io(p, e))
}

impl PerfHelpers {
    /// Reads `src/tools/perf/` of the AKA checkout at `aka_root`.
    pub fn load(aka_root: &Path) -> Result<PerfHelpers, TaskError> {
        let perf = aka_root.join("src/tools/perf");
        let block_file = perf.join("vllm_cuda_graph_block.py");
        let block = read(&block_file)?;
        let at = block.find(FUNC_ANCHOR).ok_or_else(|| {
            TaskError::field(
                &block_file,
                "helpers",
                format!("no `{FUNC_ANCHOR}` to start the helper block at"),
            )
        })?;
        Ok(PerfHelpers {
            rocmbench: read(&perf.join(ROCMBENCH_HELPER))?,
            vllm_block: block[at..].to_string(),
        })
    }
}

fn has_marker(text: &str) -> bool {
    MARK_STARTS.iter().any(|m| text.contains(m)) || text.contains(MARK_END)
}

/// Whether the task uses the rocmbench helper: it has the file, or a top-level Python file
/// imports it.
fn uses_rocmbench(dir: &Path) -> bool {
    if dir.join(ROCMBENCH_HELPER).exists() {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.path().extension().is_some_and(|x| x == "py")
            && std::fs::read_to_string(e.path())
                .is_ok_and(|t| t.contains("performance_utils_pytest"))
    })
}

/// The task's files that are still AKA's unmaterialized stubs (relative paths), or a file
/// whose helper region cannot be found. Empty for a task that needs no helpers.
pub fn stubs(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let stub = |t: &str| STUB_SIGNS.iter().any(|s| t.contains(s));
    if uses_rocmbench(dir) {
        match std::fs::read_to_string(dir.join(ROCMBENCH_HELPER)) {
            Ok(t) if stub(&t) => out.push((
                ROCMBENCH_HELPER.into(),
                "is AgentKernelArena's unmaterialized stub".into(),
            )),
            Ok(_) => {}
            Err(_) => out.push((ROCMBENCH_HELPER.into(), "is imported but missing".into())),
        }
    }
    if let Ok(t) = std::fs::read_to_string(dir.join(RUNNER)) {
        if has_marker(&t) && stub(&t) {
            out.push((
                RUNNER.into(),
                "holds AgentKernelArena's unmaterialized helper stubs".into(),
            ));
        } else if !has_marker(&t) && VLLM_SYMBOLS.iter().any(|s| t.contains(s)) && stub(&t) {
            out.push((
                RUNNER.into(),
                "uses the CUDA-graph helpers without their AKA-GENERATED markers".into(),
            ));
        }
    }
    out
}

/// `current` with its marked region holding `block`, as AKA writes it; `None` without markers.
fn replace_marked_region(current: &str, block: &str) -> Option<String> {
    let start = MARK_STARTS.iter().find(|m| current.contains(*m))?;
    let end = current.find(MARK_END)?;
    let pre = &current[..current.find(start)?];
    let post = &current[end + MARK_END.len()..];
    Some(format!("{pre}{MARK_START}\n{block}{MARK_END}{post}"))
}

/// Puts the canonical helpers into the task directory `dir` (a copy: the original tree is
/// never written); returns the files it changed.
pub fn materialize(dir: &Path, helpers: &PerfHelpers) -> Result<Vec<PathBuf>, TaskError> {
    let mut changed = Vec::new();
    if uses_rocmbench(dir) {
        let p = dir.join(ROCMBENCH_HELPER);
        if std::fs::read_to_string(&p).ok().as_deref() != Some(helpers.rocmbench.as_str()) {
            std::fs::write(&p, &helpers.rocmbench).map_err(|e| TaskError::io(&p, e))?;
            changed.push(p);
        }
    }
    let runner = dir.join(RUNNER);
    if let Ok(current) = std::fs::read_to_string(&runner) {
        if has_marker(&current) {
            let new = replace_marked_region(&current, &helpers.vllm_block).ok_or_else(|| {
                TaskError::field(&runner, "helpers", "invalid AKA-GENERATED helper markers")
            })?;
            if new != current {
                std::fs::write(&runner, new).map_err(|e| TaskError::io(&runner, e))?;
                changed.push(runner);
            }
        } else if VLLM_SYMBOLS.iter().any(|s| current.contains(s)) {
            return Err(TaskError::field(
                &runner,
                "helpers",
                "uses the CUDA-graph helpers but has no AKA-GENERATED markers to put them between",
            ));
        }
    }
    Ok(changed)
}

/// Copies the task tree `src` to `dst` (new), leaving out Python caches; links are refused.
pub fn copy_task(src: &Path, dst: &Path) -> Result<(), TaskError> {
    std::fs::create_dir_all(dst).map_err(|e| TaskError::io(dst, e))?;
    let mut entries: Vec<_> = std::fs::read_dir(src)
        .map_err(|e| TaskError::io(src, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| TaskError::io(src, e))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        if name == "__pycache__" || name == ".pytest_cache" {
            continue;
        }
        let (from, to) = (e.path(), dst.join(&name));
        let meta = std::fs::symlink_metadata(&from).map_err(|e| TaskError::io(&from, e))?;
        if meta.is_dir() {
            copy_task(&from, &to)?;
        } else if meta.is_file() {
            std::fs::copy(&from, &to).map_err(|e| TaskError::io(&from, e))?;
        } else {
            return Err(TaskError::field(
                &from,
                "materialize",
                "not a regular file or directory (a link?): copy it by hand",
            ));
        }
    }
    Ok(())
}
