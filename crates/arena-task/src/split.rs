//! Files that hold a kernel and its tests together. AgentKernelArena's rocmbench tasks (the
//! TritonBench-ROCm format) keep both in one Python file: the kernel first, then a line of
//! `#` alone (the rule), then the pytest harness that checks and times it. The agent edits the
//! kernel; the tests are the task's.
//!
//! arena takes the part above the rule from the agent and the rule and everything below it from
//! the pristine task ([`splice`]), so that an agent cannot edit the tests that judge it, and a
//! hidden configuration written into the tests reaches the candidate as it reaches the
//! original. The kernel part still runs in the harness's process (a self-reported task), so it
//! can patch what the tests call at run time; the cross-check and the pairing are what stand
//! against that, as for every task whose harness is its own.

use std::path::Path;

use crate::config::TaskConfig;

/// The fewest `#` a rule holds (the format's is 146; section banners carry words).
pub const RULE_MIN: usize = 80;

/// The byte offset where the first rule line starts, if `text` has one.
pub fn rule_start(text: &str) -> Option<usize> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end();
        if body.len() >= RULE_MIN && body.bytes().all(|b| b == b'#') {
            return Some(at);
        }
        at += line.len();
    }
    None
}

/// What the agent owns of a split file: everything above the rule (all of it, if the agent's
/// copy lost the rule).
pub fn kernel_part(text: &str) -> &str {
    &text[..rule_start(text).unwrap_or(text.len())]
}

/// The task's part of a split file: the rule and everything below it.
pub fn harness_part(text: &str) -> Option<&str> {
    rule_start(text).map(|at| &text[at..])
}

/// The file the evaluator runs: `agent`'s kernel part, then `task`'s rule and harness.
/// `None` when `task` has no rule (the file is the agent's whole).
pub fn splice(agent: &str, task: &str) -> Option<String> {
    let harness = harness_part(task)?;
    let kernel = kernel_part(agent);
    let mut out = String::with_capacity(kernel.len() + harness.len() + 1);
    out.push_str(kernel);
    if !kernel.is_empty() && !kernel.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(harness);
    Some(out)
}

/// Whether the task file `rel` of `dir` is split (a missing or unreadable file is not).
pub fn is_split(dir: &Path, rel: &str) -> bool {
    std::fs::read_to_string(dir.join(rel.trim_start_matches("./")))
        .map(|t| rule_start(&t).is_some())
        .unwrap_or(false)
}

/// The files the agent's work is taken from. A task that names none (AgentKernelArena's
/// instruction2triton tasks leave `source_file_path` empty: the agent completes the kernel of
/// the file its commands test) takes the split files its commands name; a task whose sources
/// come from a clone or an image names its own.
pub fn agent_files(dir: &Path, config: &TaskConfig) -> Vec<String> {
    let declared = config.agent_files();
    if !declared.is_empty() || config.sources_external() {
        return declared.to_vec();
    }
    command_py_files(dir, config)
        .into_iter()
        .filter(|rel| is_split(dir, rel))
        .collect()
}

/// The `.py` files of `dir` that the task's commands name (`python3 h.py`, `pytest x.py`,
/// `--py_modu_file m.py`), in command order, each once.
pub fn command_py_files(dir: &Path, config: &TaskConfig) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let commands = config
        .compile_command
        .iter()
        .chain(&config.correctness_command)
        .chain(&config.performance_command);
    for cmd in commands {
        for word in shlex::split(cmd).unwrap_or_default() {
            let rel = word.trim_start_matches("./").to_string();
            if rel.ends_with(".py")
                && !rel.contains("..")
                && !rel.starts_with('/')
                && dir.join(&rel).is_file()
                && !out.contains(&rel)
            {
                out.push(rel);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = "####################################################################################################   \n";

    fn file(kernel: &str, tests: &str) -> String {
        format!("{kernel}{RULE}{tests}")
    }

    #[test]
    fn the_rule_is_a_long_line_of_hashes_alone() {
        let t = file(
            "def k():\n    return 1\n\n",
            "import pytest\nSHAPES = [(1, 2)]\n",
        );
        assert_eq!(rule_start(&t), Some("def k():\n    return 1\n\n".len()));
        assert_eq!(kernel_part(&t), "def k():\n    return 1\n\n");
        assert!(harness_part(&t).unwrap().starts_with("####"));
        // Banners with words, short rules and comments are not rules.
        for not in [
            "######################################## Imports ########################################\n",
            "##########\n",
            "# ##################################################################################################\n",
        ] {
            assert_eq!(rule_start(not), None, "{not}");
        }
        assert_eq!(kernel_part("no rule\n"), "no rule\n");
    }

    #[test]
    fn the_agent_gives_the_kernel_and_the_task_the_tests() {
        let task = file("def k(): return 1\n", "def test(): assert k() == 1\n");
        let agent = file(
            "def k(): return 2\n",
            "def test(): pass  # the agent's own test\n",
        );
        let run = splice(&agent, &task).unwrap();
        assert_eq!(
            run,
            file("def k(): return 2\n", "def test(): assert k() == 1\n")
        );
        // An agent's copy that lost the rule is all kernel.
        let run = splice("def k(): return 3", &task).unwrap();
        assert_eq!(
            run,
            file("def k(): return 3\n", "def test(): assert k() == 1\n")
        );
        // A task file without a rule is not split.
        assert_eq!(splice(&agent, "def k(): return 1\n"), None);
        // Splicing again changes nothing (a restaged file).
        assert_eq!(splice(&run, &task).unwrap(), run);
    }

    #[test]
    fn a_task_without_sources_gives_the_agent_the_split_files_its_commands_test() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("k.py"),
            file("def k(): pass\n", "def test_k(): k()\n"),
        )
        .unwrap();
        std::fs::write(d.path().join("utils.py"), "x = 1\n").unwrap();
        let text = "task_type: instruction2triton\nsource_file_path: []\n\
            compile_command: [\"python -c \\\"import ast; ast.parse(open('k.py').read())\\\"\"]\n\
            correctness_command: [pytest -x k.py utils.py]\nperformance_command: [pytest k.py]\n";
        let config = TaskConfig::parse(&d.path().join("config.yaml"), text).unwrap();
        assert_eq!(agent_files(d.path(), &config), ["k.py"]);
        let named = TaskConfig::parse(
            &d.path().join("config.yaml"),
            &text.replace("source_file_path: []", "source_file_path: [utils.py]"),
        )
        .unwrap();
        assert_eq!(agent_files(d.path(), &named), ["utils.py"]);
    }
}
