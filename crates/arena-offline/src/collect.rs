//! What goes into a kit, gathered from the inputs a user names: each lockfile with its sets
//! file and the folders of the tasks it locks, the host tools' lockfile, agent files with what
//! they mount, and sealed hidden sets. Files under `--root` (a checkout) keep their path
//! relative to it under `share/`, so that a lockfile still finds its sets file and tasks, and
//! an agent file its mounts, by the relative paths they were written with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arena_image::Lockfile;
use arena_task::EntryKind;

use crate::error::{OfflineError, Result};
use crate::manifest::{KitHidden, KitLock};
use crate::tree::regular_files;

/// The inputs of `arenactl offline pack`.
#[derive(Debug, Clone)]
pub struct PackInputs {
    /// Every lockfile, agent file and task folder must lie below it (a checkout).
    pub root: PathBuf,
    /// Lockfiles of the runs the kit is for.
    pub locks: Vec<PathBuf>,
    /// The host tools' lockfile (lockfiles/host-tools.lock).
    pub host_lock: PathBuf,
    pub agents: Vec<PathBuf>,
    /// Sealed hidden sets (anywhere; each goes in as `hidden/<its directory's name>`).
    pub hidden: Vec<PathBuf>,
    /// The arenactl binary the kit carries.
    pub arenactl: PathBuf,
}

/// A file to copy into the kit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub from: PathBuf,
    pub executable: bool,
}

/// Everything a kit holds except the bundles, which are written from the store.
pub struct Collected {
    /// Kit path → where its bytes come from.
    pub files: BTreeMap<String, Source>,
    /// Each run lockfile (as given) with its kit entry.
    pub locks: Vec<(PathBuf, KitLock)>,
    pub host_tools: (PathBuf, KitLock),
    pub agents: Vec<String>,
    pub hidden: Vec<KitHidden>,
}

pub fn collect(inputs: &PackInputs) -> Result<Collected> {
    let root = inputs
        .root
        .canonicalize()
        .map_err(|e| OfflineError::io(&inputs.root, e))?;
    let host = Lockfile::load(&inputs.host_lock)?;
    let mut c = Collected {
        files: BTreeMap::new(),
        locks: Vec::new(),
        host_tools: (
            inputs.host_lock.clone(),
            lock_entry(&root, &inputs.host_lock, &host)?,
        ),
        agents: Vec::new(),
        hidden: Vec::new(),
    };
    add(&mut c.files, "bin/arenactl".into(), &inputs.arenactl, true)?;
    if host.images.len() != 1 || host.images[0].task.is_some() {
        return Err(OfflineError::invalid(
            inputs.host_lock.display(),
            "the host tools' lockfile must lock one image and no task (set `host-tools`)",
        ));
    }
    add_lock(&mut c.files, &root, &inputs.host_lock, &host)?;
    for path in &inputs.locks {
        let lock = Lockfile::load(path)?;
        let entry = lock_entry(&root, path, &lock)?;
        let taken = c.locks.iter().map(|(_, l)| l).chain([&c.host_tools.1]);
        if let Some(other) = taken.into_iter().find(|l| l.set == entry.set) {
            return Err(OfflineError::invalid(
                path.display(),
                format!(
                    "set `{}` is already in the kit ({})",
                    entry.set, other.lockfile
                ),
            ));
        }
        add_lock(&mut c.files, &root, path, &lock)?;
        c.locks.push((path.clone(), entry));
    }
    for path in &inputs.agents {
        let agent = arena_run::Agent::load(path)?;
        let kit = share_path(&root, path)?;
        add(&mut c.files, kit.clone(), path, false)?;
        for m in &agent.mounts {
            add_tree(&mut c.files, &root, &m.host)?;
        }
        c.agents.push(kit);
    }
    for dir in &inputs.hidden {
        let set = arena_run::HiddenSet::load(dir)?;
        let name = set
            .dir
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| OfflineError::invalid(dir.display(), "a hidden set needs a name"))?;
        let kit = format!("hidden/{name}");
        if c.hidden.iter().any(|h| h.dir == kit) {
            return Err(OfflineError::invalid(
                dir.display(),
                format!("another hidden set is also named `{name}`"),
            ));
        }
        for f in regular_files(&set.dir)? {
            add(
                &mut c.files,
                format!("{kit}/{}", f.relative),
                &f.path,
                false,
            )?;
        }
        c.hidden.push(KitHidden {
            dir: kit,
            digest: set.digest,
        });
    }
    Ok(c)
}

fn lock_entry(root: &Path, lockfile: &Path, lock: &Lockfile) -> Result<KitLock> {
    Ok(KitLock {
        bundle: format!("bundles/{}.tar", lock.set),
        lockfile: share_path(root, lockfile)?,
        set: lock.set.clone(),
    })
}

/// A lockfile, its sets file and the folder of every task it locks.
fn add_lock(
    files: &mut BTreeMap<String, Source>,
    root: &Path,
    path: &Path,
    lock: &Lockfile,
) -> Result<()> {
    add(files, share_path(root, path)?, path, false)?;
    let sets = lock.sets_path(path);
    add(files, share_path(root, &sets)?, &sets, false)?;
    let (set, _) = arena_image::set_recipe(&sets, &lock.set)?;
    let tasks = sets.parent().unwrap_or(Path::new(".")).join(&set.tasks);
    for id in lock.images.iter().filter_map(|i| i.task.as_deref()) {
        add_task(files, root, &tasks.join(id))?;
    }
    Ok(())
}

/// A task's folder as its digest sees it (`arena_task::task_tree`: no `build/` outputs or
/// caches), so that the kit carries what the lockfile pins and nothing a check left behind.
fn add_task(files: &mut BTreeMap<String, Source>, root: &Path, dir: &Path) -> Result<()> {
    let base = share_path(root, dir)?;
    for e in arena_task::task_tree(dir)? {
        match e.kind {
            EntryKind::Dir => {}
            EntryKind::File { executable, .. } => {
                add(files, format!("{base}/{}", e.rel), &e.path, executable)?
            }
            EntryKind::Symlink { .. } => {
                return Err(OfflineError::invalid(
                    e.path.display(),
                    "a link in a task tree cannot go into a kit (it holds regular files only)",
                ))
            }
        }
    }
    Ok(())
}

/// Every file at or below `path`, by its path relative to `root`.
fn add_tree(files: &mut BTreeMap<String, Source>, root: &Path, path: &Path) -> Result<()> {
    let base = share_path(root, path)?;
    for f in regular_files(path)? {
        let kit = if f.relative.is_empty() {
            base.clone()
        } else {
            format!("{base}/{}", f.relative)
        };
        add(files, kit, &f.path, f.executable)?;
    }
    Ok(())
}

fn add(
    files: &mut BTreeMap<String, Source>,
    kit: String,
    from: &Path,
    executable: bool,
) -> Result<()> {
    crate::manifest::check_kit_path(&kit)?;
    // Canonical, so that one file reached by two routes (`lockfiles/../images/sets.toml`
    // and `images/sets.toml`) is one source.
    let source = Source {
        from: from.canonicalize().map_err(|e| OfflineError::io(from, e))?,
        executable,
    };
    match files.get(&kit) {
        Some(s) if s.from != source.from => Err(OfflineError::invalid(
            from.display(),
            format!("`{kit}` would also hold {}", s.from.display()),
        )),
        _ => {
            files.insert(kit, source);
            Ok(())
        }
    }
}

/// `share/` + `path` relative to `root`; a path outside `root` is refused.
fn share_path(root: &Path, path: &Path) -> Result<String> {
    let full = path.canonicalize().map_err(|e| OfflineError::io(path, e))?;
    let rel = full.strip_prefix(root).map_err(|_| {
        OfflineError::invalid(
            path.display(),
            format!(
                "lies outside --root {}: a kit keeps the paths of what it carries relative to it",
                root.display()
            ),
        )
    })?;
    let rel = rel
        .to_str()
        .ok_or_else(|| OfflineError::invalid(path.display(), "not a UTF-8 path"))?;
    if rel.is_empty() {
        return Err(OfflineError::invalid(
            path.display(),
            "is --root itself, not a file below it",
        ));
    }
    Ok(format!("share/{rel}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn image(name: &str, task: Option<&str>) -> String {
        let task = task.map_or(String::new(), |t| {
            format!("task = \"{t}\"\ntask_digest = \"{D}\"\n")
        });
        format!(
            "[[image]]\nname = \"{name}\"\nderivation = \"{D}\"\nbase = \"scratch\"\n{task}\
             config = \"{D}\"\nconfig_size = 1\nmanifest = \"{D}\"\nmanifest_size = 1\nlayers = []\n"
        )
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A checkout with one locked task `t` (plus what a check left in it) and host tools.
    fn checkout(root: &Path) -> PackInputs {
        write(
            &root.join("images/r.toml"),
            "name = \"r\"\n[base]\nkind = \"scratch\"\n",
        );
        write(
            &root.join("images/sets.toml"),
            "[[set]]\nname = \"x\"\nrecipe = \"r.toml\"\ntasks = \"../tasks\"\ntask_types = []\n\
             [[set]]\nname = \"host-tools\"\nrecipe = \"r.toml\"\ntasks = \"../tasks\"\ntask_types = []\n",
        );
        let head =
            |set: &str| format!("version = 1\nset = \"{set}\"\nsets = \"../images/sets.toml\"\n");
        write(
            &root.join("lockfiles/x.lock"),
            &format!("{}{}{}", head("x"), image("r", None), image("t", Some("t"))),
        );
        write(
            &root.join("lockfiles/host-tools.lock"),
            &format!("{}{}", head("host-tools"), image("host-tools", None)),
        );
        write(&root.join("tasks/t/config.yaml"), "x: 1\n");
        write(&root.join("tasks/t/scripts/run.sh"), "#!/bin/sh\n");
        crate::tree::set_executable(&root.join("tasks/t/scripts/run.sh"), true).unwrap();
        write(&root.join("tasks/t/build/performance_report.json"), "{}");
        write(&root.join("tasks/t/__pycache__/k.cpython-311.pyc"), "x");
        write(&root.join("bin/arenactl"), "binary");
        PackInputs {
            root: root.to_path_buf(),
            locks: vec![root.join("lockfiles/x.lock")],
            host_lock: root.join("lockfiles/host-tools.lock"),
            agents: vec![],
            hidden: vec![],
            arenactl: root.join("bin/arenactl"),
        }
    }

    #[test]
    fn a_task_goes_in_as_its_digest_sees_it_and_a_link_in_it_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let inputs = checkout(d.path());
        let c = collect(&inputs).unwrap();
        let files: Vec<(&str, bool)> = c
            .files
            .iter()
            .map(|(k, s)| (k.as_str(), s.executable))
            .collect();
        assert_eq!(
            files,
            [
                ("bin/arenactl", true),
                ("share/images/sets.toml", false),
                ("share/lockfiles/host-tools.lock", false),
                ("share/lockfiles/x.lock", false),
                ("share/tasks/t/config.yaml", false),
                ("share/tasks/t/scripts/run.sh", true),
            ]
        );
        assert_eq!(c.locks[0].1.bundle, "bundles/x.tar");
        assert_eq!(c.host_tools.1.lockfile, "share/lockfiles/host-tools.lock");

        std::os::unix::fs::symlink("config.yaml", d.path().join("tasks/t/alias.yaml")).unwrap();
        let err = collect(&inputs).err().unwrap().to_string();
        assert!(
            err.contains("alias.yaml") && err.contains("a link in a task tree"),
            "{err}"
        );
    }
}
