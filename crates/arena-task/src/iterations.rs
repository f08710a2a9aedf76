//! The calls a self-reported harness makes per performance case, where it declares them the
//! way AgentKernelArena harnesses do: module-level `WARMUP_ITERATIONS = N` and
//! `BENCHMARK_ITERATIONS = M` in the script its performance command runs.

use std::path::Path;

use crate::config::TaskConfig;

/// The integer a module-level `NAME = <int>` line of `text` gives `name`.
fn constant(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (lhs, rhs) = l.split_once('=')?;
        if lhs.trim_end() != name || l.starts_with(char::is_whitespace) {
            return None;
        }
        let rhs = rhs.split('#').next()?.trim();
        rhs.replace('_', "").parse().ok()
    })
}

/// The first `.py` file the performance commands name, relative to the task directory.
pub fn performance_script(cfg: &TaskConfig) -> Option<String> {
    cfg.performance_command
        .iter()
        .flat_map(|c| shlex::split(c).unwrap_or_default())
        .find(|w| w.ends_with(".py") && !w.starts_with('/') && !w.contains(".."))
        .map(|w| w.trim_start_matches("./").to_string())
}

/// Warm-up plus timed calls per case, if the performance script declares both.
pub fn calls_per_case(task_dir: &Path, cfg: &TaskConfig) -> Option<u64> {
    let script = performance_script(cfg)?;
    let text = std::fs::read_to_string(task_dir.join(script)).ok()?;
    Some(constant(&text, "WARMUP_ITERATIONS")? + constant(&text, "BENCHMARK_ITERATIONS")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_counts_are_read_from_the_performance_script() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("scripts")).unwrap();
        std::fs::write(
            d.path().join("scripts/run.py"),
            "X = 1\nWARMUP_ITERATIONS = 10  # warm\nBENCHMARK_ITERATIONS = 1_00\ndef f():\n    WARMUP_ITERATIONS = 99\n",
        )
        .unwrap();
        let text = "task_type: t\nsource_file_path: [k.py]\ncompile_command: [x]\ncorrectness_command: [x]\n\
                    performance_command: [\"python3 scripts/run.py performance\"]\n";
        let cfg = TaskConfig::parse(Path::new("config.yaml"), text).unwrap();
        assert_eq!(performance_script(&cfg).as_deref(), Some("scripts/run.py"));
        assert_eq!(calls_per_case(d.path(), &cfg), Some(110));
        std::fs::write(
            d.path().join("scripts/run.py"),
            "BENCHMARK_ITERATIONS = n\n",
        )
        .unwrap();
        assert_eq!(calls_per_case(d.path(), &cfg), None);
    }
}
