//! Inputs checked before any service is contacted: a missing lockfile, agent, run directory
//! or hidden set is named with its flag at once, not after containerd or a runner was asked
//! (or, worse, as their "transport error"). The runner checks all of it again; what only it
//! can see (a runner over TCP reads paths on its own machine) is left to it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use arena_image::Lockfile;

use crate::cli::{RunArgs, UnseenEvalArgs};

/// Whether paths given to the runner are read on this machine (in-process or a unix socket)
/// and so can be checked here.
pub fn paths_are_local(runner: &Option<String>) -> bool {
    runner.as_deref().is_none_or(|r| r.starts_with("unix:"))
}

/// `p` is a file that can be opened.
fn readable_file(flag: &str, p: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(p) {
        Err(e) => bail!("{flag} {}: {e}", p.display()),
        Ok(m) if m.is_dir() => bail!("{flag} {}: a directory, not a file", p.display()),
        Ok(_) => std::fs::File::open(p)
            .map(drop)
            .with_context(|| format!("{flag} {}", p.display())),
    }
}

/// Whether `p` exists but this user may not read it (or enter a directory on its way).
fn unreadable_here(p: &Path) -> bool {
    let denied = |e: std::io::Error| e.kind() == std::io::ErrorKind::PermissionDenied;
    match std::fs::metadata(p) {
        Err(e) => denied(e),
        Ok(_) => std::fs::File::open(p).err().is_some_and(denied),
    }
}

/// `p` is a directory.
fn directory(flag: &str, p: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(p) {
        Err(e) => bail!("{flag} {}: {e}", p.display()),
        Ok(m) if !m.is_dir() => bail!("{flag} {}: not a directory", p.display()),
        Ok(_) => Ok(()),
    }
}

/// The lockfile read and parsed.
pub fn lockfile(flag: &str, p: &Path) -> anyhow::Result<Lockfile> {
    readable_file(flag, p)?;
    Lockfile::load(p).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}

/// A hidden set: a directory with its manifest (its files are checked by the runner).
pub fn hidden_set(flag: &str, p: &Path) -> anyhow::Result<()> {
    directory(flag, p)?;
    let m = p.join(arena_task::hidden::MANIFEST);
    anyhow::ensure!(
        m.is_file(),
        "{flag} {}: no {} here: not a sealed hidden set (`arenactl unseen generate` writes one)",
        p.display(),
        arena_task::hidden::MANIFEST
    );
    Ok(())
}

/// A directory a command will create (or resume in): it, or its nearest existing ancestor,
/// is a directory.
pub fn out_dir(flag: &str, p: &Path) -> anyhow::Result<()> {
    let mut at: Option<&Path> = Some(p);
    while let Some(d) = at {
        let d = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        };
        match std::fs::metadata(d) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => bail!(
                "{flag} {}: {} is a file, so the directory cannot be made",
                p.display(),
                d.display()
            ),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                at = d.parent()
            }
            Err(e) => bail!("{flag} {}: {}: {e}", p.display(), d.display()),
        }
    }
    Ok(())
}

/// `--secret` values, each read from its file here (by the submitter, never the runner).
pub fn read_secrets(given: &[(String, PathBuf)]) -> anyhow::Result<HashMap<String, String>> {
    let mut out = HashMap::new();
    for (name, file) in given {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("--secret {name}={}", file.display()))?;
        let value = text
            .strip_suffix('\n')
            .map(|v| v.strip_suffix('\r').unwrap_or(v))
            .unwrap_or(&text);
        anyhow::ensure!(
            out.insert(name.clone(), value.to_string()).is_none(),
            "--secret {name}: given twice"
        );
    }
    Ok(out)
}

/// A token file, where one is given or configured.
pub fn token_file(p: &Option<PathBuf>) -> anyhow::Result<()> {
    match p {
        Some(p) => readable_file("--token-file", p),
        None => Ok(()),
    }
}

/// Everything `arenactl run` can check on this machine; `runner` is the resolved --runner
/// (None: in-process, or Slurm jobs, whose agents directory is this one's).
pub fn run(args: &RunArgs, runner: &Option<String>, out: &Path) -> anyhow::Result<()> {
    if !paths_are_local(runner) {
        return Ok(());
    }
    // A runner on a unix socket may run as another user, who can read what this one cannot:
    // a file this user may not read is then the runner's to judge.
    let theirs = |p: &Path| runner.is_some() && unreadable_here(p);
    if !theirs(&args.image_lock) {
        let lock = lockfile("--image-lock", &args.image_lock)?;
        let ids: Vec<String> = lock.images.iter().filter_map(|r| r.task.clone()).collect();
        arena_run::plan::select(&args.tasks, &ids).map_err(|e| {
            anyhow::anyhow!(
                "{e} ({} locks {} tasks: `arenactl task list` shows their ids)",
                args.image_lock.display(),
                ids.len()
            )
        })?;
    }
    let agent = Path::new(&args.agent);
    if agent.is_file() || args.agent.contains('/') {
        if !theirs(agent) {
            arena_run::agent::Agent::load(agent).map_err(|e| anyhow::anyhow!("--agent: {e}"))?;
        }
    } else if runner.is_none() {
        // A name is the runner's to look up: here only for a runner this process starts.
        let dir = &args.local.agents_dir;
        let file = dir.join(format!("{}.toml", args.agent));
        anyhow::ensure!(
            file.is_file(),
            "--agent {}: no agent file of that name, and no {} (agent files are looked up in              --agents-dir, now {})",
            args.agent,
            file.display(),
            dir.display()
        );
        arena_run::agent::Agent::load(&file).map_err(|e| anyhow::anyhow!("--agent: {e}"))?;
    }
    if let Some(h) = &args.unseen {
        if !theirs(h) && !theirs(&h.join(arena_task::hidden::MANIFEST)) {
            hidden_set("--unseen", h)?;
        }
    }
    if let Some(b) = &args.bundle {
        readable_file("--bundle", b)?;
    }
    match out_dir("--out", out) {
        Err(_) if theirs(out) || out.ancestors().skip(1).any(theirs) => Ok(()),
        r => r,
    }
}

/// Everything `arenactl unseen eval` can check on this machine.
pub fn unseen_eval(args: &UnseenEvalArgs, runner: &Option<String>) -> anyhow::Result<()> {
    if !paths_are_local(runner) {
        return Ok(());
    }
    directory("RUN_DIR", &args.run_dir)?;
    anyhow::ensure!(
        args.run_dir.join("run.json").is_file(),
        "RUN_DIR {}: no run.json here: not the directory of an `arenactl run`",
        args.run_dir.display()
    );
    hidden_set("--unseen", &args.unseen)
}
