//! A candidate as the Evaluate API receives it — task-relative paths and their contents — made
//! into what a run's evaluator would take from an agent's workspace: only the task's agent
//! files (any other path is refused, naming it), the original's content for those left out, and
//! the same staging (`arena_eval::stage_sources`: regular files, size caps, a file split into
//! kernel and tests keeps the task's tests). Its digest names what was evaluated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arena_digest::Digest;
use arena_eval::sources::SOURCE_CAP;
use arena_task::Task;

use super::EvalError;

/// A staged candidate, removed when dropped.
pub struct Candidate {
    _dir: tempfile::TempDir,
    /// The staged files, each at its task-relative path below here.
    pub staged: PathBuf,
    pub rels: Vec<String>,
    /// [`digest`] of the staged files.
    pub digest: Digest,
}

/// The digest of a candidate's files: sha256 over `arena.candidate.v1\n`, then for each file in
/// path order its path's length (u64, little-endian), the path, its content's length and the
/// content.
pub fn digest(files: &BTreeMap<String, Vec<u8>>) -> Digest {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"arena.candidate.v1\n");
    for (path, bytes) in files {
        h.update((path.len() as u64).to_le_bytes());
        h.update(path.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    Digest::from_sha256(h.finalize().into())
}

fn plain(rel: &str) -> String {
    rel.trim_start_matches("./").to_string()
}

/// Stages `files` for `task` in a new directory below `root`.
pub fn stage(
    task: &Task,
    files: BTreeMap<String, Vec<u8>>,
    root: &Path,
) -> Result<Candidate, EvalError> {
    let agent_files: Vec<String> = task.agent_files.iter().map(|f| plain(f)).collect();
    if files.is_empty() {
        return Err(EvalError::Invalid(format!(
            "files: empty; the candidate is one or more of the task's agent files ({})",
            agent_files.join(", ")
        )));
    }
    // One file under the empty path is the task's one agent file (`arenactl eval --candidate
    // FILE`).
    let files = match (files.get(""), agent_files.as_slice()) {
        (Some(_), [only]) if files.len() == 1 => {
            files.into_values().map(|b| (only.clone(), b)).collect()
        }
        (Some(_), _) => {
            return Err(EvalError::Invalid(format!(
                "files: a file without a path is the task's one agent file, but it has {} ({})",
                agent_files.len(),
                agent_files.join(", ")
            )))
        }
        _ => files,
    };
    for (name, bytes) in &files {
        if !agent_files.contains(&plain(name)) {
            return Err(EvalError::Invalid(format!(
                "files: `{name}` is not one of the task's agent files ({})",
                agent_files.join(", ")
            )));
        }
        if bytes.len() as u64 > SOURCE_CAP {
            return Err(EvalError::Invalid(format!(
                "files: `{name}` is {} bytes; a source may hold at most {SOURCE_CAP}",
                bytes.len()
            )));
        }
    }
    let io = |p: &Path, e: std::io::Error| EvalError::Internal(format!("{}: {e}", p.display()));
    let dir = tempfile::Builder::new()
        .prefix("candidate-")
        .tempdir_in(root)
        .map_err(|e| io(root, e))?;
    let workspace = dir.path().join("workspace");
    let given: BTreeMap<String, Vec<u8>> = files.into_iter().map(|(k, v)| (plain(&k), v)).collect();
    for rel in &agent_files {
        let dest = workspace.join(rel);
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p).map_err(|e| io(p, e))?;
        }
        let bytes = match given.get(rel) {
            Some(b) => b.clone(),
            None => arena_eval::untrusted::read_beneath(&task.dir, Path::new(rel), SOURCE_CAP)
                .map_err(|why| {
                    EvalError::Internal(format!("{}: {rel}: {why}", task.dir.display()))
                })?,
        };
        std::fs::write(&dest, bytes).map_err(|e| io(&dest, e))?;
    }
    let staged = dir.path().join("staged");
    let sources = arena_eval::stage_sources(&workspace, &task.agent_files, &task.dir, &staged)
        .map_err(|e| EvalError::Invalid(format!("files: {e}")))?;
    let mut contents = BTreeMap::new();
    for s in &sources {
        contents.insert(
            s.rel.clone(),
            std::fs::read(&s.host).map_err(|e| io(&s.host, e))?,
        );
    }
    Ok(Candidate {
        digest: digest(&contents),
        rels: sources.into_iter().map(|s| s.rel).collect(),
        staged,
        _dir: dir,
    })
}
