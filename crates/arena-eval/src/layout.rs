//! Where things are inside an evaluator container. The task (harness included) comes from the
//! image at [`TASK_ROOT`]; the runner binds only these paths over it.

/// The task directory inside task images (the image's task layer).
pub const TASK_ROOT: &str = "/task";
/// Written only by arena's code in the container (root's, mode 0700): one `GATE EXIT_CODE`
/// line per gate to [`GATES_FILE`], the reports, the evaluator's record.
pub const OUT_DIR: &str = "/arena/out";
pub const GATES_FILE: &str = "gates";

/// Where a declared source file (`source/k.py`) of the agent is bound, read-only.
pub fn source_path(rel: &str) -> String {
    format!("{TASK_ROOT}/{}", rel.trim_start_matches("./"))
}
