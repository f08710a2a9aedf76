//! `config.yaml` of an AgentKernelArena task: every field the public tree uses, typed, plus the
//! fields we do not know, kept verbatim.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_norway::Value;

use crate::error::{TaskError, TaskErrors};
use crate::fields::{kind_of, FieldReader};
use crate::task_type::TaskType;

/// The `prompt:` map. `instructions` replaces the default instruction text of the prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PromptConfig {
    pub instructions: Option<String>,
    pub source_code: Option<String>,
    pub cheatsheet: Option<String>,
    pub task_type: Option<String>,
    /// Keys of `prompt:` we do not know.
    pub unknown: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskConfig {
    pub task_type: TaskType,
    /// Shell command strings, run from the task directory.
    pub compile_command: Vec<String>,
    pub correctness_command: Vec<String>,
    pub performance_command: Vec<String>,
    /// Files the agent may edit, relative to the task directory.
    pub source_file_path: Vec<String>,
    pub target_kernel_functions: Vec<String>,
    pub task_result_template: Option<serde_json::Value>,
    pub prompt: PromptConfig,
    pub target_file_path: Vec<String>,
    pub harness_path: Option<String>,
    /// arena's own field: a module implementing the trusted harness interface (SOURCE,
    /// ENTRY, TEST_SHAPES, make_inputs, reference, check). With it the task is evaluated by
    /// arena's trusted evaluator, the kernel in a separate unprivileged process; without it,
    /// by the task's own commands (self-reported times, cross-checked).
    pub trusted_harness: Option<String>,
    /// arena's own field: the memory the task's containers may use (`32GiB`); without it,
    /// the run's `--memory`, else 16 GiB.
    pub memory_limit: Option<u64>,
    pub repository_language: Option<String>,
    pub repo_url: Option<String>,
    pub repo_subdir: Option<String>,
    pub post_clone_install: Vec<String>,
    pub post_clone_install_mode: Option<String>,
    pub platform_support: Option<serde_json::Value>,
    pub supported_archs: Vec<String>,
    pub kernel_identity: Option<serde_json::Value>,
    pub source_origin: Option<serde_json::Value>,
    pub editable_sources: Vec<String>,
    pub image_repo_path: Option<String>,
    pub image_repo_exclude: Vec<String>,
    /// Per-gate time limits in seconds.
    pub compile_timeout: Option<f64>,
    pub correctness_timeout: Option<f64>,
    pub performance_timeout: Option<f64>,
    /// Top-level fields we do not know: kept, reported as warnings.
    pub unknown: BTreeMap<String, serde_json::Value>,
}

impl TaskConfig {
    /// The files the agent's work is taken from: `target_file_path` where the task names one
    /// (torch2hip, hip2hip: the agent writes the target; the source it translates stays the
    /// task's own, as the reference the target is checked against), else `source_file_path`.
    pub fn agent_files(&self) -> &[String] {
        if self.target_file_path.is_empty() {
            &self.source_file_path
        } else {
            &self.target_file_path
        }
    }

    /// Sources come from outside the task directory (a clone, or the image), so their
    /// existence is checked when the workspace is set up, not when the task is read.
    pub fn sources_external(&self) -> bool {
        self.repo_url.is_some() || self.image_repo_path.is_some()
    }

    /// Parses `config.yaml` text. `file` is only used in messages.
    pub fn parse(file: &Path, text: &str) -> Result<TaskConfig, TaskErrors> {
        let doc: Value = serde_norway::from_str(text).map_err(|e| TaskError::Syntax {
            file: file.to_path_buf(),
            message: e.to_string(),
        })?;
        let mapping = match doc {
            Value::Mapping(m) => m,
            Value::Null => {
                return Err(TaskError::field(file, "<document>", "file is empty").into());
            }
            other => {
                return Err(TaskError::field(
                    file,
                    "<document>",
                    format!("expected a map of fields, found {}", kind_of(&other)),
                )
                .into());
            }
        };
        let mut r = FieldReader::new(file, "", mapping);

        let task_type = r.required_string("task_type").map(TaskType);
        let compile_command = r.required_string_list("compile_command");
        let correctness_command = r.required_string_list("correctness_command");
        let performance_command = r.required_string_list("performance_command");
        let has_sources = r.has("source_file_path");
        let source_file_path = r.string_or_list("source_file_path");
        let target_kernel_functions = r.string_or_list("target_kernel_functions");
        let task_result_template = r.any("task_result_template");
        let prompt = read_prompt(&mut r);
        let target_file_path = r.string_or_list("target_file_path");
        let harness_path = r.string("harness_path");
        let trusted_harness = r.string("trusted_harness");
        let memory_limit = r.bytes("memory_limit");
        let repository_language = r.string("repository_language");
        let repo_url = r.string("repo_url");
        let repo_subdir = r.string("repo_subdir");
        let post_clone_install = r.string_or_list("post_clone_install");
        let post_clone_install_mode = r.string("post_clone_install_mode");
        let platform_support = r.any("platform_support");
        let supported_archs = r.string_or_list("supported_archs");
        let kernel_identity = r.any("kernel_identity");
        let source_origin = r.any("source_origin");
        let editable_sources = r.string_or_list("editable_sources");
        let image_repo_path = r.string("image_repo_path");
        let image_repo_exclude = r.string_or_list("image_repo_exclude");
        let compile_timeout = r.positive_seconds("compile_timeout");
        let correctness_timeout = r.positive_seconds("correctness_timeout");
        let performance_timeout = r.positive_seconds("performance_timeout");
        let unknown = r.rest();

        // The agent needs to know what it may edit; only a repository task may say it with
        // `editable_sources` instead.
        if !has_sources && editable_sources.is_empty() && repo_url.is_none() {
            r.errors.push(TaskError::field(
                r.file(),
                "source_file_path",
                "required field is missing (list the files the agent may edit)",
            ));
        }

        if !r.errors.is_empty() {
            return Err(TaskErrors(r.errors));
        }
        Ok(TaskConfig {
            task_type: task_type.expect("checked above: errors empty"),
            compile_command,
            correctness_command,
            performance_command,
            source_file_path,
            target_kernel_functions,
            task_result_template,
            prompt,
            target_file_path,
            harness_path,
            trusted_harness,
            memory_limit,
            repository_language,
            repo_url,
            repo_subdir,
            post_clone_install,
            post_clone_install_mode,
            platform_support,
            supported_archs,
            kernel_identity,
            source_origin,
            editable_sources,
            image_repo_path,
            image_repo_exclude,
            compile_timeout,
            correctness_timeout,
            performance_timeout,
            unknown,
        })
    }
}

fn read_prompt(r: &mut FieldReader) -> PromptConfig {
    let Some(m) = r.mapping("prompt") else {
        return PromptConfig::default();
    };
    let mut p = FieldReader::new(r.file(), "prompt.", m);
    let prompt = PromptConfig {
        instructions: p.string("instructions"),
        source_code: p.string("source_code"),
        cheatsheet: p.string("cheatsheet"),
        task_type: p.string("task_type"),
        unknown: p.rest(),
    };
    r.errors.append(&mut p.errors);
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "\
task_type: triton2triton
compile_command:
- python3 scripts/task_runner.py compile
correctness_command:
- python3 scripts/task_runner.py correctness
performance_command:
- python3 scripts/task_runner.py performance
source_file_path:
- source/kernel.py
";

    fn parse(text: &str) -> Result<TaskConfig, TaskErrors> {
        TaskConfig::parse(Path::new("tasks/x/y/config.yaml"), text)
    }

    fn one_error(text: &str) -> String {
        let errs = parse(text).unwrap_err();
        assert_eq!(errs.0.len(), 1, "expected one error, got: {errs}");
        errs.to_string()
    }

    #[test]
    fn reads_minimal_config() {
        let c = parse(MINIMAL).unwrap();
        assert_eq!(c.task_type.as_str(), "triton2triton");
        assert_eq!(
            c.compile_command,
            ["python3 scripts/task_runner.py compile"]
        );
        assert_eq!(c.source_file_path, ["source/kernel.py"]);
        assert!(c.unknown.is_empty());
        assert_eq!(c.prompt, PromptConfig::default());
    }

    #[test]
    fn memory_limits_are_sizes() {
        assert_eq!(
            parse(&format!("{MINIMAL}memory_limit: 536870912\n"))
                .unwrap()
                .memory_limit,
            Some(512 << 20)
        );
        for bad in ["memory_limit: lots", "memory_limit: 0", "memory_limit: [1]"] {
            let e = parse(&format!("{MINIMAL}{bad}\n")).unwrap_err().to_string();
            assert!(e.contains("memory_limit"), "{bad}: {e}");
        }
    }

    #[test]
    fn reads_every_documented_field() {
        let text = format!(
            "{MINIMAL}target_kernel_functions: [softmax_kernel]
task_result_template: null
prompt:
  instructions: make it fast
  source_code: null
  cheatsheet: use tl.max
  task_type: triton2triton
target_file_path: source/kernel.py
harness_path: scripts/task_runner.py
memory_limit: 32GiB
repository_language: python
repo_url: https://example.invalid/repo.git
repo_subdir: kernels
post_clone_install: [pip install -e .]
post_clone_install_mode: pip
platform_support: {{amd: true, nvidia: false}}
supported_archs: [gfx942, gfx950]
kernel_identity: {{name: softmax}}
source_origin: vllm
editable_sources: [source/kernel.py]
image_repo_path: /opt/repo
image_repo_exclude: [tests]
compile_timeout: 120
correctness_timeout: 300.5
performance_timeout: 600
"
        );
        let c = parse(&text).unwrap();
        assert_eq!(c.target_kernel_functions, ["softmax_kernel"]);
        assert_eq!(c.prompt.instructions.as_deref(), Some("make it fast"));
        assert_eq!(c.prompt.cheatsheet.as_deref(), Some("use tl.max"));
        assert_eq!(c.target_file_path, ["source/kernel.py"]);
        assert_eq!(c.memory_limit, Some(32 << 30));
        assert_eq!(
            c.repo_url.as_deref(),
            Some("https://example.invalid/repo.git")
        );
        assert_eq!(c.supported_archs, ["gfx942", "gfx950"]);
        assert_eq!(
            c.platform_support.as_ref().unwrap()["amd"],
            serde_json::json!(true)
        );
        assert_eq!(c.image_repo_exclude, ["tests"]);
        assert_eq!(c.correctness_timeout, Some(300.5));
        assert!(c.sources_external());
        assert!(c.unknown.is_empty(), "{:?}", c.unknown);
    }

    #[test]
    fn keeps_unknown_fields() {
        let c = parse(&format!(
            "{MINIMAL}new_field: [1, 2]\nprompt: {{tone: terse}}\n"
        ))
        .unwrap();
        assert_eq!(c.unknown["new_field"], serde_json::json!([1, 2]));
        assert_eq!(c.prompt.unknown["tone"], serde_json::json!("terse"));
    }

    #[test]
    fn wrong_type_names_file_and_field() {
        let text = MINIMAL.replace(
            "compile_command:\n- python3 scripts/task_runner.py compile",
            "compile_command: 3",
        );
        assert_eq!(
            one_error(&text),
            "tasks/x/y/config.yaml: compile_command: expected a list of strings, found a number"
        );
    }

    #[test]
    fn wrong_item_type_names_index() {
        let text = MINIMAL.replace("- source/kernel.py", "- source/kernel.py\n- {a: 1}");
        assert_eq!(
            one_error(&text),
            "tasks/x/y/config.yaml: source_file_path[1]: expected a string, found a map"
        );
    }

    #[test]
    fn missing_required_field() {
        let text = MINIMAL.replace("task_type: triton2triton\n", "");
        assert_eq!(
            one_error(&text),
            "tasks/x/y/config.yaml: task_type: required field is missing"
        );
    }

    #[test]
    fn missing_sources_is_an_error_unless_editable_sources() {
        let text = MINIMAL.replace("source_file_path:\n- source/kernel.py\n", "");
        assert!(one_error(&text).contains("source_file_path: required field is missing"));
        let text2 = format!("{text}editable_sources: [a.py]\n");
        assert!(parse(&text2).is_ok());
        // A repository task may leave them out, as AgentKernelArena allows.
        assert!(parse(&format!("{text}repo_url: https://example.invalid/r.git\n")).is_ok());
    }

    #[test]
    fn the_agent_writes_the_target_where_there_is_one() {
        let c = parse(MINIMAL).unwrap();
        assert_eq!(c.agent_files(), ["source/kernel.py"]);
        let c = parse(&format!("{MINIMAL}target_file_path: hip/k.hip\n")).unwrap();
        assert_eq!(c.agent_files(), ["hip/k.hip"]);
    }

    #[test]
    fn empty_command_list_is_an_error() {
        let text = MINIMAL.replace(
            "performance_command:\n- python3 scripts/task_runner.py performance",
            "performance_command: []",
        );
        assert_eq!(
            one_error(&text),
            "tasks/x/y/config.yaml: performance_command: expected at least one entry, found an empty list"
        );
    }

    #[test]
    fn all_errors_are_reported() {
        let text = "task_type: 7\ncompile_command: x\ncorrectness_command: [a]\n";
        let errs = parse(text).unwrap_err();
        let s = errs.to_string();
        assert!(
            s.contains("task_type: expected a string, found a number"),
            "{s}"
        );
        assert!(
            s.contains("performance_command: required field is missing"),
            "{s}"
        );
        assert!(
            s.contains("source_file_path: required field is missing"),
            "{s}"
        );
        assert_eq!(errs.0.len(), 4, "{s}");
    }

    #[test]
    fn yaml_syntax_error_names_file() {
        let errs = parse("task_type: [unclosed\n").unwrap_err();
        let s = errs.to_string();
        assert!(
            s.starts_with("tasks/x/y/config.yaml: YAML syntax error:"),
            "{s}"
        );
        assert!(s.contains("line"), "{s}");
    }

    #[test]
    fn non_map_and_empty_documents() {
        assert!(
            one_error("- a\n- b\n").contains("<document>: expected a map of fields, found a list")
        );
        assert!(one_error("").contains("<document>: file is empty"));
    }

    #[test]
    fn bad_timeout() {
        let s = one_error(&format!("{MINIMAL}compile_timeout: -5\n"));
        assert!(
            s.contains("compile_timeout: expected a positive number of seconds, found -5"),
            "{s}"
        );
        let s = one_error(&format!("{MINIMAL}compile_timeout: soon\n"));
        assert!(
            s.contains("compile_timeout: expected a number of seconds, found a string"),
            "{s}"
        );
    }
}
