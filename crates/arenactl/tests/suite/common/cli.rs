//! Running arenactl as a user does, on task trees a test writes: its output, exit code and
//! no panics.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn arenactl(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_arenactl"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run arenactl")
}

/// arenactl run with `env` and no configuration file, and none of the ARENA_* variables of
/// the caller's shell.
pub fn clean(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_arenactl"));
    c.args(args).current_dir(cwd);
    for (k, _) in std::env::vars() {
        if k.starts_with("ARENA_") {
            c.env_remove(k);
        }
    }
    c.env("ARENA_CONFIG", "/dev/null");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run arenactl")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn no_panic(o: &Output) {
    assert!(
        !stderr(o).contains("panicked"),
        "arenactl panicked: {}",
        stderr(o)
    );
}

pub const GOOD_CONFIG: &str = "\
task_type: python2python
source_file_path: [source/k.py]
target_kernel_functions: [k]
compile_command: [python3 scripts/task_runner.py compile]
correctness_command: [python3 scripts/task_runner.py correctness]
performance_command: [python3 scripts/task_runner.py performance]
";

/// A one-task tree `<tmp>/tasks/t/` with the given config.
pub fn task_tree(config: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tasks/t");
    std::fs::create_dir_all(dir.join("source")).unwrap();
    std::fs::write(dir.join("source/k.py"), "def k(): pass\n").unwrap();
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    (tmp, dir)
}
