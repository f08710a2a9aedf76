//! The user's configuration file: defaults for the flags many commands share, so that a lab
//! names its runner, token and store once. `$ARENA_CONFIG`, else
//! `$XDG_CONFIG_HOME/arena/config.toml`, else `~/.config/arena/config.toml`; a missing
//! default file is no configuration, a missing `$ARENA_CONFIG` file an error. A flag always
//! wins over the file; so does the variable a flag's help names (ARENA_STORE,
//! ARENA_RUNNER_TOKEN_FILE), as environments are set for one shell or job.
//!
//! ```toml
//! runner = "unix:/run/arena/runner.sock"   # --runner
//! token_file = "~/.config/arena/token"     # --token-file (relative: to this file's directory)
//! store = "/data/arena/store"              # --store
//! ```

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Context;
use serde::Deserialize;

/// The variable that names the configuration file.
pub const CONFIG_VAR: &str = "ARENA_CONFIG";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Default of --runner.
    pub runner: Option<String>,
    /// Default of --token-file.
    pub token_file: Option<PathBuf>,
    /// Default of --store.
    pub store: Option<PathBuf>,
}

/// Where the configuration file is looked for, and whether it was named explicitly.
pub fn path() -> Option<(PathBuf, bool)> {
    if let Some(p) = std::env::var_os(CONFIG_VAR).filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(p), true));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some((base.join("arena/config.toml"), false))
}

/// The configuration, read once (on first use: a command that needs none of its keys never
/// fails on a broken file).
pub fn get() -> anyhow::Result<&'static Config> {
    static CONFIG: OnceLock<Result<Config, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| load().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

fn load() -> anyhow::Result<Config> {
    let Some((file, named)) = path() else {
        return Ok(Config::default());
    };
    tracing::debug!(file = %file.display(), named, "reading the configuration file");
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        // The default file of a HOME this user may not read (a command run as another user
        // with root's environment) is no configuration, as a missing one is.
        Err(e)
            if !named
                && matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                ) =>
        {
            tracing::debug!(file = %file.display(), error = %e, "no configuration file");
            return Ok(Config::default());
        }
        Err(e) => {
            let how = if named {
                format!(" (named by {CONFIG_VAR})")
            } else {
                String::new()
            };
            return Err(e).with_context(|| format!("reading {}{how}", file.display()));
        }
    };
    parse(&file, &text)
}

/// Parses a configuration file's text; every error names the file, the line and the key.
pub fn parse(file: &Path, text: &str) -> anyhow::Result<Config> {
    let mut c: Config = toml::from_str(text).map_err(|e| {
        let message = e.message().trim_end();
        // toml spans an unknown key's whole table: the key's own line is the one to fix.
        let line = unknown_key(message)
            .and_then(|k| {
                text.lines().position(|l| {
                    l.trim_start()
                        .strip_prefix(k)
                        .is_some_and(|rest| rest.trim_start().starts_with('='))
                })
            })
            .map(|i| i + 1)
            .or_else(|| e.span().map(|s| text[..s.start].lines().count() + 1))
            .unwrap_or(1);
        anyhow::anyhow!("{}: line {line}: {message}", file.display())
    })?;
    if let Some(r) = &c.runner {
        crate::arg_parse::runner_addr(r)
            .map_err(|why| anyhow::anyhow!("{}: runner: {why}", file.display()))?;
    }
    // Relative paths are the file's, wherever arenactl is started.
    let dir = file.parent().unwrap_or(Path::new("."));
    let resolve = |p: &mut Option<PathBuf>| {
        if let Some(v) = p {
            *v = expand_home(v);
            if v.is_relative() {
                *v = dir.join(&*v);
            }
        }
    };
    resolve(&mut c.token_file);
    resolve(&mut c.store);
    Ok(c)
}

/// The key of toml's "unknown field `KEY`, expected …".
fn unknown_key(message: &str) -> Option<&str> {
    message
        .strip_prefix("unknown field `")?
        .split_once('`')
        .map(|(k, _)| k)
}

fn expand_home(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => p.to_path_buf(),
    }
}

/// --runner: the flag, else the file's `runner` (None: a runner in-process, where the
/// command has one).
pub fn runner(flag: &Option<String>) -> anyhow::Result<Option<String>> {
    match flag {
        Some(r) => Ok(Some(r.clone())),
        None => Ok(get()?.runner.clone()),
    }
}

/// --token-file: the flag, else ARENA_RUNNER_TOKEN_FILE, else the file's `token_file`.
pub fn token_file(flag: &Option<PathBuf>) -> anyhow::Result<Option<PathBuf>> {
    match arena_client::token_file(flag.as_deref()) {
        Some(t) => Ok(Some(t)),
        None => Ok(get()?.token_file.clone()),
    }
}

/// --store: the flag, else ARENA_STORE, else the file's `store`, else the default cache.
pub fn store_root(flag: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(s) = flag {
        return Ok(s.clone());
    }
    if std::env::var_os("ARENA_STORE").is_none() {
        if let Some(s) = &get()?.store {
            return Ok(s.clone());
        }
    }
    Ok(arena_image::Store::default_root())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_paths() {
        let c = parse(
            Path::new("/etc/arena/config.toml"),
            "runner = \"unix:/run/r.sock\"\ntoken_file = \"token\"\nstore = \"/s\"\n",
        )
        .unwrap();
        assert_eq!(c.runner.as_deref(), Some("unix:/run/r.sock"));
        assert_eq!(c.token_file, Some(PathBuf::from("/etc/arena/token")));
        assert_eq!(c.store, Some(PathBuf::from("/s")));
    }

    #[test]
    fn unknown_keys_and_bad_values_name_file_line_and_key() {
        let e = parse(Path::new("c.toml"), "store = \"/s\"\nrunnr = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("c.toml: line 2: unknown field `runnr`"),
            "{e}"
        );
        let e = parse(Path::new("c.toml"), "runner = \"gpu1\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("c.toml: runner: `gpu1`"), "{e}");
    }
}
