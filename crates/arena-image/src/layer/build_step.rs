//! A build layer's command (recipe `kind = "build"`): files made at build time, the way a Nix
//! derivation makes them. The builder image's layers are unpacked into a scratch root; the
//! command runs there as root of a user namespace of its own (so no privilege is needed on the
//! host and none leaks to it), chrooted, with no network (a network namespace of its own, with
//! nothing in it), the recipe's `sources` bound read-only at /src, a writable /build, an
//! empty environment but for a fixed PATH, locale, time zone and SOURCE_DATE_EPOCH. Whether
//! its output is the same bytes every time is the command's own property: CI builds such an
//! image twice and compares digests (crates/arena-image/tests/build_layer.rs).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::error::{ImageError, Result};

/// Directories made in the scratch root before the command runs: mount points and the
/// command's working directory.
const MOUNT_POINTS: &[&str] = &["dev", "proc", "tmp", "src", "build"];

/// The recipe's fields, checked at load: the field at fault and why.
pub fn check_spec(
    command: &[String],
    outputs: &[String],
) -> std::result::Result<(), (&'static str, String)> {
    if command.is_empty() {
        return Err(("command", "no command".into()));
    }
    if outputs.is_empty() {
        return Err((
            "outputs",
            "no outputs: name the directories the layer keeps".into(),
        ));
    }
    for o in outputs {
        let bad_component = o
            .split('/')
            .skip(1)
            .any(|c| c.is_empty() || c == "." || c == "..");
        if !o.starts_with('/') || o == "/" || bad_component {
            return Err((
                "outputs",
                format!("`{o}` is not an absolute directory below / without `..`"),
            ));
        }
        let top = o.split('/').nth(1).unwrap_or("");
        if MOUNT_POINTS.contains(&top) {
            return Err((
                "outputs",
                format!("`{o}` is under /{top}, which the build mounts over or works in"),
            ));
        }
    }
    Ok(())
}

/// Mounts what the command sees, then replaces itself with the chrooted command. Runs as the
/// namespace's root on the host's side of the chroot (its `mount` and `chroot`).
const ENTER: &str = r#"set -eu
root=$1 src=$2
shift 2
for d in null zero full random urandom; do
  : > "$root/dev/$d"
  mount --bind "/dev/$d" "$root/dev/$d"
done
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount --rbind "$src" "$root/src"
mount -o remount,bind,ro "$root/src"
exec chroot "$root" /bin/sh -c 'cd /build && exec "$@"' sh "$@"
"#;

/// Runs `command` in `root` (the builder's unpacked layers) with `sources` at /src. The
/// command's output goes to `log`; a failure names the exit status and ends with the log's
/// last lines.
pub fn run(root: &Path, sources: &Path, command: &[String], mtime: u64, log: &Path) -> Result<()> {
    let fail = |m: String| ImageError::invalid(format!("build layer `{}`", command.join(" ")), m);
    if !root.join("bin/sh").exists() {
        return Err(fail(
            "the builder image has no /bin/sh to start the command with".into(),
        ));
    }
    for d in MOUNT_POINTS {
        let p = root.join(d);
        std::fs::create_dir_all(&p).map_err(|e| ImageError::io(&p, e))?;
    }
    let sources = std::fs::canonicalize(sources).map_err(|e| ImageError::io(sources, e))?;
    let out = std::fs::File::create(log).map_err(|e| ImageError::io(log, e))?;
    let err = out.try_clone().map_err(|e| ImageError::io(log, e))?;
    let status = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "--net",
            "--pid",
            "--fork",
            "--kill-child",
            "--",
            "/bin/sh",
            "-c",
            ENTER,
            "enter",
        ])
        .arg(root)
        .arg(&sources)
        .args(command)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("HOME", "/build")
        .env("TMPDIR", "/tmp")
        .env("LC_ALL", "C")
        .env("TZ", "UTC")
        .env("SOURCE_DATE_EPOCH", mtime.to_string())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| {
            fail(format!(
                "could not start `unshare` (util-linux) to isolate the build: {e}"
            ))
        })?;
    if status.success() {
        return Ok(());
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    Err(fail(format!(
        "the command failed ({status}); its last lines:\n{tail}"
    )))
}

#[cfg(test)]
mod tests {
    use super::check_spec;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn outputs_must_be_plain_directories_the_build_does_not_mount() {
        let cmd = s(&["/bin/sh", "/src/build.sh"]);
        assert!(check_spec(&cmd, &s(&["/opt/sim"])).is_ok());
        assert_eq!(check_spec(&[], &s(&["/opt/sim"])).unwrap_err().0, "command");
        assert_eq!(check_spec(&cmd, &[]).unwrap_err().0, "outputs");
        for bad in [
            "opt/sim",
            "/",
            "/opt/../etc",
            "/opt//sim",
            "/tmp/x",
            "/src",
            "/build/o",
        ] {
            let (field, why) = check_spec(&cmd, &s(&[bad])).unwrap_err();
            assert_eq!(field, "outputs", "{bad}");
            assert!(why.contains(bad), "{why}");
        }
    }
}
