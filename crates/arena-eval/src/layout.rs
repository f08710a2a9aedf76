//! Where things are inside an evaluator container. The task (harness included) comes from the
//! image at [`TASK_ROOT`]; the runner binds only these paths over it.

/// The task directory inside task images (the image's task layer).
pub const TASK_ROOT: &str = "/task";
/// The gate script, bound read-only.
pub const SCRIPT: &str = "/arena/gates.sh";
/// Read-write: the script writes one `GATE EXIT_CODE` line per gate it ran to [`GATES_FILE`].
pub const OUT_DIR: &str = "/arena/out";
pub const GATES_FILE: &str = "gates";
/// Read-write: the harness's `build/` (its reports), bound from the run directory.
pub fn build_dir() -> String {
    format!("{TASK_ROOT}/build")
}

/// Where a declared source file (`source/k.py`) of the agent is bound, read-only.
pub fn source_path(rel: &str) -> String {
    format!("{TASK_ROOT}/{}", rel.trim_start_matches("./"))
}
