//! `arenactl env`: the configuration file and every ARENA_* variable arena reads, one line
//! each (tests/suite/cli_conventions.rs checks that each variable the crates read is here).

use super::{print_json, Outcome};

/// (variable, who reads it, what it does).
pub const VARIABLES: &[(&str, &str, &str)] = &[
    ("ARENA_CONFIG", "arenactl", "the configuration file (default ~/.config/arena/config.toml)"),
    ("ARENA_LOG", "arenactl", "log filter, e.g. `info` or `arena_runner=debug`; wins over -v/-q"),
    ("ARENA_STORE", "arenactl", "the image store (--store; default ~/.cache/arena/store)"),
    ("ARENA_DEB_DIR", "arenactl", "pinned .deb files of image builds (--deb-dir)"),
    ("ARENA_WHEEL_DIR", "arenactl", "pinned wheels of image builds (--wheel-dir)"),
    ("ARENA_RUNNER_TOKEN_FILE", "arenactl", "a runner client's bearer token file (--token-file)"),
    ("ARENA_CNI_PATH", "runner", "where the CNI plugins of agents' egress network are (an offline install sets it)"),
    ("ARENA_NVIDIA_DRIVER_DIR", "runner", "the NVIDIA driver's user-space libraries mounted into GPU containers (empty: none; default /usr/local/nvidia)"),
    ("ARENA_ZSTD_WORKERS", "image builds", "threads compressing zstd layers (default: every CPU)"),
    ("ARENA_GZIP_WORKERS", "image builds", "threads compressing gzip layers (default: every CPU)"),
    ("ARENA_TASK_ID", "agent container", "set by arena: the task's id"),
    ("ARENA_PROMPT_FILE", "agent container", "set by arena: the file holding the agent's prompt"),
    ("ARENA_WORKSPACE", "agent container", "set by arena: the agent's working directory"),
    ("ARENA_AGENT_SCRIPT", "agent container", "the shell command agents/scripted.toml runs (passed through from `arenactl run`'s environment)"),
    ("ARENA_CRASH_AT", "tests", "crash the runner at a named point (crash-recovery tests only)"),
    ("ARENA_TEST_STORES", "tests", "where the integration tests keep their image stores (default ~/.cache/arena/stores)"),
    ("ARENA_TEST_TIER", "tests", "`timing`: hold timing tests to their tight bars (ci/test-timing.sh)"),
    ("ARENA_TARBALL_DIR", "tests", "the agent CLIs' pinned tarballs (default ~/.cache/arena/tarballs)"),
];

/// Variables of the scripts in ci/, by prefix: each script's header says what its own mean.
const SCRIPT_PREFIXES: &str = "ARENA_GPU_*, ARENA_BENCH_*, ARENA_SUITE_*, ARENA_ORDER_* and \
     the other ARENA_* names in ci/*.sh and ci/gpu/ are those scripts' settings, described \
     in each script's header";

/// `arenactl env`: the configuration file (read, so that a broken one is named here) and the
/// variables, with the values set in this environment.
pub fn run(json: bool) -> anyhow::Result<Outcome> {
    let file = crate::config::path();
    let config = crate::config::get()?;
    if json {
        let vars: Vec<_> = VARIABLES
            .iter()
            .map(|(name, who, what)| {
                serde_json::json!({
                    "name": name, "read_by": who, "description": what,
                    "value": std::env::var(name).ok(),
                })
            })
            .collect();
        print_json(&serde_json::json!({
            "config_file": file.as_ref().map(|(p, _)| p),
            "config_file_exists": file.as_ref().is_some_and(|(p, _)| p.is_file()),
            "config": {
                "runner": config.runner,
                "token_file": config.token_file,
                "store": config.store,
            },
            "variables": vars,
        }))?;
        return Ok(Outcome::Ok);
    }
    match &file {
        Some((p, _)) => println!(
            "config file: {} ({}; its keys runner, token_file and store are the defaults of \
             --runner, --token-file and --store)",
            p.display(),
            if p.is_file() { "present" } else { "absent" }
        ),
        None => println!("config file: none (set ARENA_CONFIG, or HOME)"),
    }
    let show = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    println!("  runner      {}", show(config.runner.clone()));
    let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    println!("  token_file  {}", show(path(&config.token_file)));
    println!("  store       {}", show(path(&config.store)));
    println!();
    let w = VARIABLES.iter().map(|v| v.0.len()).max().unwrap_or(0);
    for (name, who, what) in VARIABLES {
        let set = match std::env::var(name) {
            Ok(v) => format!(" [set: {v}]"),
            Err(_) => String::new(),
        };
        println!("{name:<w$}  {who:<15}  {what}{set}");
    }
    println!();
    println!("{SCRIPT_PREFIXES}.");
    Ok(Outcome::Ok)
}
