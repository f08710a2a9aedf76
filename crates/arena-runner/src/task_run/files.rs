//! The files an agent left, walked one way for every reader of them (what is kept of the
//! workspace, the secrets taken out of it).

/// The regular files below `root`, as paths relative to it: no link followed, other kinds of
/// file left out, each directory's entries in name order (depth first).
pub(crate) fn regular_files(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![std::path::PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let r = rel.join(e.file_name());
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(r);
            } else if ft.is_file() {
                files.push(r);
            }
        }
    }
    files
}
