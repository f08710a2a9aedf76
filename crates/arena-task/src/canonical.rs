//! Canonical task ids: a task's path below the root of its task set, whatever directory a
//! command is given (`tasks`, `tasks/python2python` or the task directory itself all name
//! `python2python/arena/matmul`, the id a lockfile records). A set's root is the directory
//! above the nearest task-type directory (`<root>/<task_type>/<source>/<name>`,
//! AgentKernelArena's layout), or above the nearest `level<N>` directory (KernelBench's, as
//! arena-kernelbench writes it: `<root>/level1/<name>`). A task in neither layout keeps its
//! id relative to the directory given, as [`discover`](crate::discover()) makes it.

use std::path::{Path, PathBuf};

use crate::discover::{walk_reporting, FoundTask};
use crate::error::TaskError;
use crate::task::CONFIG_FILE;
use crate::task_type::KNOWN_TASK_TYPES;

/// The tasks below a directory, with canonical ids, and the directories below it that hold
/// no task at all (no config.yaml in them or below): each named once, at its top.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    pub tasks: Vec<FoundTask>,
    pub skipped: Vec<PathBuf>,
}

/// The task type a config.yaml declares, read without validating the rest.
fn declared_type(task_dir: &Path) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct TypeOnly {
        task_type: Option<String>,
    }
    let text = std::fs::read_to_string(task_dir.join(CONFIG_FILE)).ok()?;
    serde_norway::from_str::<TypeOnly>(&text).ok()?.task_type
}

fn is_level_dir(name: &str) -> bool {
    name.strip_prefix("level")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The root of the task set `task_dir` belongs to (see the module's doc), if it is in one of
/// the two layouts.
pub fn set_root(task_dir: &Path) -> Option<PathBuf> {
    let abs = task_dir
        .canonicalize()
        .or_else(|_| std::path::absolute(task_dir))
        .ok()?;
    let own = declared_type(task_dir);
    abs.ancestors().skip(1).find_map(|dir| {
        let name = dir.file_name()?.to_str()?;
        let is_type = KNOWN_TASK_TYPES.contains(&name) || own.as_deref() == Some(name);
        (is_type || is_level_dir(name)).then(|| dir.parent().map(Path::to_path_buf))?
    })
}

/// The canonical id of the task in `task_dir`, if it is in a set's layout.
pub fn canonical_id(task_dir: &Path) -> Option<String> {
    let root = set_root(task_dir)?;
    let abs = task_dir
        .canonicalize()
        .or_else(|_| std::path::absolute(task_dir))
        .ok()?;
    let rel = abs.strip_prefix(&root).ok()?;
    let id = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    (!id.is_empty()).then_some(id)
}

/// The tasks at or below `dir` with canonical ids (sorted by id), and the directories that
/// hold none. A directory with no task at all is an error, as for `discover`.
pub fn discover_canonical(dir: &Path) -> Result<Discovery, TaskError> {
    let (mut tasks, skipped) = walk_reporting(dir)?;
    for t in &mut tasks {
        if let Some(id) = canonical_id(&t.dir) {
            t.id = id;
        }
    }
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(Discovery { tasks, skipped })
}

/// [`discover_canonical`] of each directory, in order; one id found twice (under two
/// directories, or twice under one) is refused with both directories named.
pub fn discover_all_canonical(dirs: &[PathBuf]) -> Result<Discovery, TaskError> {
    let mut seen: std::collections::BTreeMap<String, PathBuf> = Default::default();
    let mut out = Discovery::default();
    for d in dirs {
        let found = discover_canonical(d)?;
        for f in found.tasks {
            if let Some(first) = seen.insert(f.id.clone(), f.dir.clone()) {
                // The same directory named twice (`tasks tasks/python2python`) is one task.
                if same_dir(&first, &f.dir) {
                    continue;
                }
                return Err(TaskError::DuplicateId {
                    id: f.id,
                    first,
                    second: f.dir,
                });
            }
            out.tasks.push(f);
        }
        out.skipped.extend(found.skipped);
    }
    Ok(out)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(root: &Path, rel: &str) -> PathBuf {
        let d = root.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(CONFIG_FILE), "task_type: python2python\n").unwrap();
        d
    }

    #[test]
    fn ids_are_the_same_whatever_directory_is_named() {
        let t = tempfile::tempdir().unwrap();
        let tasks = t.path().join("tasks");
        let m = task(&tasks, "python2python/arena/matmul");
        task(&tasks, "python2python/arena/sum");
        std::fs::create_dir_all(tasks.join("harnesses/notes")).unwrap();
        let ids = |d: &Path| -> Vec<String> {
            discover_canonical(d)
                .unwrap()
                .tasks
                .into_iter()
                .map(|f| f.id)
                .collect()
        };
        let both = ["python2python/arena/matmul", "python2python/arena/sum"];
        assert_eq!(ids(&tasks), both);
        assert_eq!(ids(&tasks.join("python2python")), both);
        assert_eq!(ids(&tasks.join("python2python/arena")), both);
        assert_eq!(ids(&m), ["python2python/arena/matmul"]);
        // A directory with no task below it is reported, at its top only.
        let d = discover_canonical(&tasks).unwrap();
        assert_eq!(d.skipped, [tasks.join("harnesses")]);
    }

    #[test]
    fn kernelbench_layout_and_tasks_in_no_layout() {
        let t = tempfile::tempdir().unwrap();
        let kb = t.path().join("kb");
        let p = kb.join("level1/1_Square");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join(CONFIG_FILE), "task_type: kernelbench\n").unwrap();
        assert_eq!(canonical_id(&p).as_deref(), Some("level1/1_Square"));
        // No type or level directory above: the id stays relative to what was named.
        let plain = task(t.path(), "mine/a/b");
        std::fs::write(plain.join(CONFIG_FILE), "task_type: custom\n").unwrap();
        assert_eq!(canonical_id(&plain), None);
        let d = discover_canonical(&t.path().join("mine")).unwrap();
        assert_eq!(d.tasks[0].id, "a/b");
        // Its own declared type, though unknown to arena, marks the layout.
        let own = task(t.path(), "sets/cuda2cuda/lab/k");
        std::fs::write(own.join(CONFIG_FILE), "task_type: cuda2cuda\n").unwrap();
        assert_eq!(canonical_id(&own).as_deref(), Some("cuda2cuda/lab/k"));
    }

    #[test]
    fn a_task_named_twice_is_one_task() {
        let t = tempfile::tempdir().unwrap();
        let tasks = t.path().join("tasks");
        task(&tasks, "python2python/arena/matmul");
        let d = discover_all_canonical(&[tasks.clone(), tasks.join("python2python")]).unwrap();
        assert_eq!(d.tasks.len(), 1);
    }
}
