//! Which process holds an egress attachment: `DATA_DIR/owners/<container id>` holds the pid of
//! the container's first process and that process's start time (field 22 of
//! `/proc/<pid>/stat`, in clock ticks since boot), so that a pid the kernel has since given to
//! another process does not pass for the container. Every runner on a host shares the
//! attachments (host-local's leases, arena's nftables table); this record is how one runner
//! tells another runner's live agent from an address a crashed runner left. A record also
//! names the pid namespace its pid belongs to: a runner in another one cannot judge it, and
//! keeps it.

use std::path::{Path, PathBuf};

use crate::error::{Result, RuntimeError};

fn path(dir: &Path, id: &str) -> PathBuf {
    dir.join("owners").join(id)
}

/// The start time of process `pid`, or None when there is no such process.
fn started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses: the
    // fields after it start after the last ')'. Field 22 is the 20th of those.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// This process's pid namespace (the inode of its `ns/pid` link), in which the pids it reads
/// from /proc are meant.
fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// Records `pid` (alive now) as the holder of `id`'s attachment. Written before the address
/// is taken, so that no other runner's clean-up ever sees the address without its record.
pub fn record(dir: &Path, id: &str, pid: u32) -> Result<()> {
    let start = started(pid).ok_or_else(|| {
        RuntimeError::invalid(
            "egress network",
            format!("the process {pid} of {id} is gone"),
        )
    })?;
    let ns = pid_namespace().unwrap_or(0);
    let p = path(dir, id);
    let parent = p.parent().expect("owners/ID has a parent");
    std::fs::create_dir_all(parent).map_err(|e| RuntimeError::io(parent, e))?;
    // Beside the record under a name of its own: ids may hold dots.
    let tmp = parent.join(format!("{id}.tmp"));
    std::fs::write(&tmp, format!("{pid} {start} {ns}\n")).map_err(|e| RuntimeError::io(&tmp, e))?;
    std::fs::rename(&tmp, &p).map_err(|e| RuntimeError::io(&p, e))
}

/// Drops `id`'s record (none is not an error).
pub fn forget(dir: &Path, id: &str) {
    let _ = std::fs::remove_file(path(dir, id));
}

/// Whether the process recorded for `id` still runs. No record, or one that cannot be read,
/// is not alive: an attachment made before records were kept is cleaned up as before. A
/// record of another pid namespace is alive: its pid means nothing here.
pub fn alive(dir: &Path, id: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(path(dir, id)) else {
        return false;
    };
    let mut f = text.split_whitespace().map(str::parse::<u64>);
    match (f.next(), f.next(), f.next()) {
        (Some(Ok(_)), Some(Ok(_)), Some(Ok(ns))) if Some(ns) != pid_namespace() => true,
        (Some(Ok(pid)), Some(Ok(start)), _) => {
            u32::try_from(pid).is_ok_and(|pid| started(pid) == Some(start))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_holder_is_alive_and_a_gone_or_reused_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        record(d, "mine", std::process::id()).unwrap();
        assert!(alive(d, "mine"));
        record(d, "run.a", std::process::id()).unwrap();
        record(d, "run.b", std::process::id()).unwrap();
        assert!(alive(d, "run.a") && alive(d, "run.b"));
        assert!(!path(d, "run.tmp").exists());

        // A process that has exited and been reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(record(d, "gone", pid).is_err());
        std::fs::write(path(d, "gone"), format!("{pid} 1\n")).unwrap();
        assert!(!alive(d, "gone"));

        // This process's pid with another start time: the pid was given to someone else.
        let now = started(std::process::id()).unwrap();
        std::fs::write(
            path(d, "reused"),
            format!("{} {}\n", std::process::id(), now + 1),
        )
        .unwrap();
        assert!(!alive(d, "reused"));

        // A record of another pid namespace: kept, whatever its pid says here.
        std::fs::write(path(d, "elsewhere"), format!("{pid} 1 1\n")).unwrap();
        assert!(alive(d, "elsewhere"));
        // A record of this one, as `record` writes it, for the gone process.
        let here = pid_namespace().unwrap();
        std::fs::write(path(d, "gone-here"), format!("{pid} 1 {here}\n")).unwrap();
        assert!(!alive(d, "gone-here"));

        // No record, or one that does not parse.
        assert!(!alive(d, "never"));
        std::fs::write(path(d, "junk"), "pid? start?\n").unwrap();
        assert!(!alive(d, "junk"));

        forget(d, "mine");
        assert!(!alive(d, "mine"));
        forget(d, "mine");
    }

    #[test]
    fn the_start_time_is_read_past_a_name_with_spaces_and_parentheses() {
        // A process named "a) b": /proc's stat still splits after the last ')'. A link, not
        // a copy: the kernel names the process after the path it was given, and a copy written
        // here could be open for writing in a child another test forks meanwhile, which fails
        // the exec with ETXTBSY (CI saw it).
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("a) b");
        std::os::unix::fs::symlink("/bin/sleep", &exe).unwrap();
        let mut child = std::process::Command::new(&exe).arg("5").spawn().unwrap();
        let pid = child.id();
        let got = started(pid);
        let _ = child.kill();
        let _ = child.wait();
        let mine = started(std::process::id()).unwrap();
        assert!(got.is_some_and(|t| t >= mine), "{got:?} vs {mine}");
    }
}
