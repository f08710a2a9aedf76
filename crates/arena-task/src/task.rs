//! A task directory read from disk: its id, config and the warnings found while reading it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::TaskConfig;
use crate::error::{TaskError, TaskErrors};
use crate::id::TaskId;
use crate::paths::{check_relative, resolve_inside};

pub const CONFIG_FILE: &str = "config.yaml";

#[derive(Debug, Clone, Serialize)]
pub struct Task {
    /// Path of the task directory relative to the tasks root, `/`-separated
    /// (`triton2triton/arena/row_softmax`).
    pub id: TaskId,
    pub dir: PathBuf,
    pub config: TaskConfig,
    /// The files the agent's work is taken from (relative to `dir`): `target_file_path`,
    /// else `source_file_path`, else the split files the commands test
    /// ([`crate::split::agent_files`]). Of a split file, only the kernel part is the agent's.
    pub agent_files: Vec<String>,
    /// Things worth a look that do not stop the task from running.
    pub warnings: Vec<String>,
}

impl Task {
    /// Reads and validates the task in `dir`. All problems are reported together.
    pub fn load(dir: &Path, id: &str) -> Result<Task, TaskErrors> {
        let id = TaskId::new(id).map_err(TaskError::from)?;
        let file = dir.join(CONFIG_FILE);
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TaskError::NotATask {
                    dir: dir.to_path_buf(),
                }
                .into())
            }
            Err(e) => return Err(TaskError::io(&file, e).into()),
        };
        let config = TaskConfig::parse(&file, &text)?;
        let mut errors = Vec::new();
        let mut warnings = Vec::new();

        for (i, rel) in config.source_file_path.iter().enumerate() {
            let field = format!("source_file_path[{i}]");
            let checked = if config.sources_external() {
                // Cloned or in-image sources: only the lexical rules apply now.
                check_relative(&file, &field, rel).map(|_| ())
            } else {
                resolve_inside(dir, &file, &field, rel).map(|_| ())
            };
            if let Err(e) = checked {
                errors.push(e);
            }
        }
        for (name, list) in [
            ("target_file_path", &config.target_file_path),
            ("editable_sources", &config.editable_sources),
        ] {
            for (i, rel) in list.iter().enumerate() {
                if let Err(e) = check_relative(&file, &format!("{name}[{i}]"), rel) {
                    errors.push(e);
                }
            }
        }
        if let Some(h) = &config.trusted_harness {
            match resolve_inside(dir, &file, "trusted_harness", h) {
                Ok(_)
                    if config
                        .source_file_path
                        .iter()
                        .any(|s| s.trim_start_matches("./") == h.trim_start_matches("./")) =>
                {
                    errors.push(TaskError::field(
                        &file,
                        "trusted_harness",
                        format!(
                            "`{h}` is a source the agent may edit; the trusted harness must not be"
                        ),
                    ))
                }
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        if let Some(h) = &config.harness_path {
            if let Err(e) = check_relative(&file, "harness_path", h) {
                errors.push(e);
            }
        }
        // AgentKernelArena's perf-helper stubs raise when run: the task would fail every
        // performance gate, and its digest would not cover the helpers it times with.
        for (rel, what) in crate::helpers::stubs(dir) {
            errors.push(TaskError::field(
                dir.join(&rel),
                "perf helpers",
                format!(
                    "{what}; put the helpers in first: `arenactl task materialize --aka-root AKA_CHECKOUT {} --out DIR`",
                    dir.display()
                ),
            ));
        }
        if !errors.is_empty() {
            return Err(TaskErrors(errors));
        }

        let fname = file.display();
        if !config.task_type.is_known() {
            warnings.push(format!(
                "{fname}: task_type: unknown task type `{}` (kept as is)",
                config.task_type
            ));
        }
        for key in config.unknown.keys() {
            warnings.push(format!("{fname}: {key}: unknown field (kept as is)"));
        }
        for key in config.prompt.unknown.keys() {
            warnings.push(format!("{fname}: prompt.{key}: unknown field (kept as is)"));
        }
        if config.target_kernel_functions.is_empty() {
            warnings.push(format!(
                "{fname}: target_kernel_functions: not set; the prompt will name no target kernels"
            ));
        }
        if config.sources_external() {
            warnings.push(format!(
                "{fname}: source_file_path: sources come from {}; checked at workspace setup",
                if config.repo_url.is_some() {
                    "the repository clone"
                } else {
                    "inside the image"
                }
            ));
        }
        let agent_files = crate::split::agent_files(dir, &config);
        if agent_files.is_empty() && !config.sources_external() {
            warnings.push(format!(
                "{fname}: source_file_path: names no file, and no file its commands test holds \
                 a kernel part; nothing the agent writes will reach the evaluator"
            ));
        }
        for rel in &agent_files {
            if crate::split::is_split(dir, rel) {
                warnings.push(format!(
                    "{fname}: {rel}: kernel and tests in one file; the agent's work is the part \
                     above the line of #s, the tests below it are the task's"
                ));
            }
        }
        Ok(Task {
            id,
            dir: dir.to_path_buf(),
            config,
            agent_files,
            warnings,
        })
    }
}
