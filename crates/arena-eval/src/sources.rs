//! The agent's declared source files, copied out of its workspace for the evaluator. Only the
//! files of `source_file_path` are taken, only as regular files: a symlink planted by the agent
//! (say `source/k.py -> /etc/shadow`, or into the harness) is refused, not followed, and a bind
//! mount never sees the agent's workspace itself. Of a file the task splits into kernel and
//! tests (`arena_task::split`), only the kernel part is the agent's: the staged file is that
//! part followed by the pristine task's tests.

use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use crate::error::EvalError;
use crate::untrusted::{read_beneath, Refusal};

/// A staged source: where it is on the host and the task-relative path it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedSource {
    pub rel: String,
    pub host: PathBuf,
}

fn refused(rel: &str, reason: impl Into<String>) -> EvalError {
    EvalError::Refused {
        path: format!("workspace/{rel}"),
        reason: reason.into(),
    }
}

/// The most a declared source file may hold.
pub const SOURCE_CAP: u64 = 16 << 20;

/// Copies each declared file from `workspace` to `stage` (same relative paths, mode 0644),
/// reading it beneath the workspace without following any link, as a regular file of at
/// most [`SOURCE_CAP`] bytes (a sparse file is as large as it claims). A file that `task`
/// (the pristine task tree) splits into kernel and tests is staged as the agent's kernel
/// part and the task's tests.
pub fn stage_sources(
    workspace: &Path,
    declared: &[String],
    task: &Path,
    stage: &Path,
) -> Result<Vec<StagedSource>, EvalError> {
    let mut out = Vec::new();
    for rel in declared {
        let rel = rel.trim_start_matches("./");
        let rp = Path::new(rel);
        if rel.is_empty() || rp.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(refused(rel, "not a plain relative path"));
        }
        let bytes = read_beneath(workspace, rp, SOURCE_CAP).map_err(|why| {
            refused(
                rel,
                match why {
                    Refusal::Missing => "declared source file is missing from the workspace".into(),
                    Refusal::Escapes => {
                        "is a symbolic link or lies behind one; the evaluator takes regular files only".into()
                    }
                    Refusal::NotRegular => "is not a regular file".into(),
                    Refusal::TooLarge { size, cap } => {
                        format!("is {size} bytes; a declared source may hold at most {cap}")
                    }
                    Refusal::Io(e) => e,
                },
            )
        })?;
        let bytes = with_task_tests(bytes, &task.join(rp)).map_err(|why| refused(rel, why))?;
        let dest = stage.join(rp);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| EvalError::io(parent, e))?;
        }
        std::fs::write(&dest, &bytes).map_err(|e| EvalError::io(&dest, e))?;
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| EvalError::io(&dest, e))?;
        out.push(StagedSource {
            rel: rel.to_string(),
            host: dest,
        });
    }
    Ok(out)
}

/// The agent's `bytes` of a file, with the tests of the task's own copy (`task_file`) in place
/// of the agent's where the task's copy is split into kernel and tests.
fn with_task_tests(bytes: Vec<u8>, task_file: &Path) -> Result<Vec<u8>, String> {
    let Ok(task_text) = std::fs::read_to_string(task_file) else {
        return Ok(bytes);
    };
    if arena_task::split::rule_start(&task_text).is_none() {
        return Ok(bytes);
    }
    let agent = String::from_utf8(bytes).map_err(|_| {
        "is not UTF-8 text; its kernel part is cut from the task's tests by a line of #s"
            .to_string()
    })?;
    Ok(arena_task::split::splice(&agent, &task_text)
        .expect("the task's copy has a rule")
        .into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn copies_declared_files_only() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        fs::create_dir_all(ws.join("source")).unwrap();
        fs::write(ws.join("source/k.py"), "new").unwrap();
        fs::write(ws.join("source/other.py"), "x").unwrap();
        let staged = stage_sources(
            &ws,
            &["source/k.py".into()],
            &d.path().join("task"),
            &d.path().join("st"),
        )
        .unwrap();
        assert_eq!(staged.len(), 1);
        assert_eq!(fs::read_to_string(&staged[0].host).unwrap(), "new");
        assert!(!d.path().join("st/source/other.py").exists());
    }

    #[test]
    fn refuses_symlinks_missing_files_and_escapes() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        fs::create_dir_all(ws.join("source")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", ws.join("source/k.py")).unwrap();
        let st = d.path().join("st");
        let task = d.path().join("task");
        let e = stage_sources(&ws, &["source/k.py".into()], &task, &st).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = stage_sources(&ws, &["source/none.py".into()], &task, &st).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        let e = stage_sources(&ws, &["../x.py".into()], &task, &st).unwrap_err();
        assert!(e.to_string().contains("plain relative"), "{e}");
        // A linked directory on the way is refused too.
        fs::create_dir_all(d.path().join("elsewhere")).unwrap();
        fs::write(d.path().join("elsewhere/k.py"), "x").unwrap();
        std::os::unix::fs::symlink(d.path().join("elsewhere"), ws.join("src2")).unwrap();
        let e = stage_sources(&ws, &["src2/k.py".into()], &task, &st).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // A sparse file claiming a terabyte is refused before anything is read.
        std::fs::File::create(ws.join("source/big.py"))
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let e = stage_sources(&ws, &["source/big.py".into()], &task, &st).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
        nix::unistd::mkfifo(&ws.join("source/fifo.py"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = stage_sources(&ws, &["source/fifo.py".into()], &task, &st).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn of_a_split_file_the_agent_gives_the_kernel_and_the_task_the_tests() {
        let d = tempfile::tempdir().unwrap();
        let (ws, task) = (d.path().join("ws"), d.path().join("task"));
        fs::create_dir_all(&ws).unwrap();
        fs::create_dir_all(&task).unwrap();
        let rule = "#".repeat(146);
        fs::write(
            task.join("k.py"),
            format!("def k(): return 1\n{rule}\ndef test(): assert k() == 1\n"),
        )
        .unwrap();
        fs::write(
            ws.join("k.py"),
            format!("def k(): return 2\n{rule}\ndef test(): pass\n"),
        )
        .unwrap();
        let st = d.path().join("st");
        let staged = stage_sources(&ws, &["k.py".into()], &task, &st).unwrap();
        assert_eq!(
            fs::read_to_string(&staged[0].host).unwrap(),
            format!("def k(): return 2\n{rule}\ndef test(): assert k() == 1\n")
        );
        // Staged again from the stage (an unseen evaluation's restage): the same file.
        let again = stage_sources(&st, &["k.py".into()], &task, &d.path().join("st2")).unwrap();
        assert_eq!(
            fs::read(&again[0].host).unwrap(),
            fs::read(&staged[0].host).unwrap()
        );
        // Bytes that are not text cannot be cut at the rule.
        fs::write(ws.join("k.py"), b"\xff\xfe").unwrap();
        let e = stage_sources(&ws, &["k.py".into()], &task, &d.path().join("st3")).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }
}
