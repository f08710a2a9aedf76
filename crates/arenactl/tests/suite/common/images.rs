//! Helpers of the image tests (`arenactl image/lock/bundle`): arenactl under a umask, its
//! output checked, and copies of the repo's build inputs locked into a private store.

use std::path::Path;
use std::process::{Command, Output};

use super::{debs, repo};

/// Runs arenactl through `sh` with the given umask.
pub fn arenactl_umask(umask: &str, args: &[&str], cwd: &Path) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_arenactl"))
        .args(args)
        .env("ARENA_DEB_DIR", debs())
        .current_dir(cwd);
    cmd.output().unwrap()
}

pub fn arenactl(args: &[&str], cwd: &Path) -> Output {
    arenactl_umask("022", args, cwd)
}

pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "arenactl failed ({:?}):\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn failed(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected exit 1: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// A copy of the repo's images/, tasks/ and lockfiles/ made under `umask`, with every file's
/// mtime set to `mtime` (a `touch -d` date).
pub fn copy_inputs(dst: &Path, umask: &str, mtime: &str) {
    let r = repo();
    let script = format!(
        "umask {umask} && mkdir -p {d} && cp -r {r}/images {r}/tasks {d}/ && mkdir -p {d}/lockfiles \
         && find {d} -exec touch -h -d '{mtime}' {{}} +",
        d = dst.display(),
        r = r.display()
    );
    assert!(Command::new("sh")
        .arg("-c")
        .arg(script)
        .status()
        .unwrap()
        .success());
}

pub fn lock(dir: &Path, store: &Path, umask: &str) -> String {
    ok(&arenactl_umask(
        umask,
        &["lock", "--store", store.to_str().unwrap()],
        dir,
    ));
    std::fs::read_to_string(dir.join("lockfiles/cpu.lock")).unwrap()
}

pub fn image_section<'a>(lockfile: &'a str, name: &str) -> &'a str {
    let start = lockfile.find(&format!("name = \"{name}\"")).expect(name);
    let end = lockfile[start..]
        .find("\n[[image]]")
        .map_or(lockfile.len(), |e| start + e);
    &lockfile[start..end]
}
