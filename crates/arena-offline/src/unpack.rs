//! Reading a kit into a staging directory, every file checked against the manifest: from the
//! tar `pack` wrote, or from that tar already extracted (a directory holding `MANIFEST.json`).
//! A file the manifest does not list, one it lists that is missing, a size or sha256 that
//! differs, a link or special entry, or a path outside the kit is refused by name.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use arena_digest::{Digest, HashingWriter};
use arena_image::bundle::Counted;
use arena_image::Progress;

use crate::error::{OfflineError, Result};
use crate::manifest::{check_kit_path, KitManifest, KIT_DIR, MANIFEST};
use crate::tree::{make_parent, regular_files, set_executable};

/// The most bytes a manifest may have (a kit of a million files has a manifest of ~200 MB;
/// more is not a kit).
const MANIFEST_MAX: u64 = 256 << 20;

type Found = BTreeMap<String, (Digest, u64)>;

/// Reads `kit` (a tar or an extracted kit directory) into `staging`; returns the manifest's
/// bytes, and the manifest, once every file is verified against it.
pub fn unpack_kit(
    kit: &Path,
    staging: &Path,
    progress: &dyn Progress,
) -> Result<(Vec<u8>, KitManifest)> {
    let meta = std::fs::metadata(kit).map_err(|e| OfflineError::io(kit, e))?;
    let (bytes, found) = if meta.is_dir() {
        from_dir(kit, staging, progress)?
    } else {
        progress.phase("reading the kit", Some(meta.len()));
        let r = from_tar(kit, staging, progress);
        progress.finish_phase();
        r?
    };
    let manifest = KitManifest::parse(&bytes)?;
    check(kit, &manifest, &found)?;
    for f in &manifest.files {
        set_executable(&staging.join(&f.path), f.executable)?;
    }
    Ok((bytes, manifest))
}

fn from_tar(kit: &Path, staging: &Path, progress: &dyn Progress) -> Result<(Vec<u8>, Found)> {
    let f = std::fs::File::open(kit).map_err(|e| OfflineError::io(kit, e))?;
    let mut ar = tar::Archive::new(Counted {
        inner: std::io::BufReader::with_capacity(1 << 20, f),
        progress,
    });
    let bad = |m: String| OfflineError::invalid(kit.display(), m);
    let mut manifest = None;
    let mut found = Found::new();
    for entry in ar.entries().map_err(|e| bad(format!("not a tar: {e}")))? {
        let mut entry = entry.map_err(|e| bad(format!("unreadable (truncated?) entry: {e}")))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let rest = name
            .trim_end_matches('/')
            .strip_prefix(KIT_DIR)
            .and_then(|r| r.strip_prefix('/'))
            .ok_or_else(|| bad(format!("entry `{name}` is not under {KIT_DIR}/")))?
            .to_string();
        match entry.header().entry_type() {
            tar::EntryType::Directory => continue,
            tar::EntryType::Regular => {}
            other => {
                return Err(bad(format!(
                    "entry `{name}` is a {other:?}, not a regular file"
                )))
            }
        }
        if rest == MANIFEST {
            if manifest.is_some() {
                return Err(bad(format!("entry `{name}` is in the kit twice")));
            }
            if entry.size() > MANIFEST_MAX {
                return Err(bad(format!("{MANIFEST} of {} bytes", entry.size())));
            }
            let mut buf = Vec::new();
            entry
                .read_to_end(&mut buf)
                .map_err(|e| bad(format!("{MANIFEST} is truncated: {e}")))?;
            manifest = Some(buf);
            continue;
        }
        check_kit_path(&rest).map_err(|_| bad(format!("entry `{name}` leaves the kit")))?;
        if found.contains_key(&rest) {
            return Err(bad(format!("entry `{name}` is in the kit twice")));
        }
        let (digest, n) = write(&staging.join(&rest), &mut entry)
            .map_err(|e| bad(format!("`{rest}` is truncated: {e}")))?;
        found.insert(rest, (digest, n));
    }
    let manifest =
        manifest.ok_or_else(|| bad(format!("no {KIT_DIR}/{MANIFEST}: not an arena kit")))?;
    Ok((manifest, found))
}

fn from_dir(kit: &Path, staging: &Path, progress: &dyn Progress) -> Result<(Vec<u8>, Found)> {
    let mpath = kit.join(MANIFEST);
    let bytes = std::fs::read(&mpath).map_err(|e| OfflineError::io(&mpath, e))?;
    let manifest = KitManifest::parse(&bytes)?;
    let listed: std::collections::BTreeSet<&str> =
        manifest.files.iter().map(|f| f.path.as_str()).collect();
    for f in regular_files(kit)? {
        if f.relative != MANIFEST && !listed.contains(f.relative.as_str()) {
            return Err(OfflineError::invalid(
                f.path.display(),
                format!("is not in the kit's {MANIFEST}"),
            ));
        }
    }
    progress.phase(
        "reading the kit",
        Some(manifest.files.iter().map(|f| f.size).sum()),
    );
    let mut found = Found::new();
    for f in &manifest.files {
        let from = kit.join(&f.path);
        let file = std::fs::File::open(&from).map_err(|e| OfflineError::io(&from, e))?;
        let mut r = Counted {
            inner: file,
            progress,
        };
        let got = write(&staging.join(&f.path), &mut r).map_err(|e| OfflineError::io(&from, e))?;
        found.insert(f.path.clone(), got);
    }
    progress.finish_phase();
    Ok((bytes, found))
}

/// Copies `r` to a new file at `to`, returning what it wrote.
fn write(to: &Path, r: &mut dyn Read) -> std::io::Result<(Digest, u64)> {
    make_parent(to).map_err(|e| std::io::Error::other(e.to_string()))?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
    let mut w = HashingWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
    std::io::copy(r, &mut w)?;
    let (bw, digest, n) = w.into_parts();
    bw.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok((digest, n))
}

/// Every listed file found with its size and sha256, and nothing else.
fn check(kit: &Path, m: &KitManifest, found: &Found) -> Result<()> {
    for f in &m.files {
        let what = format!("{} in {}", f.path, kit.display());
        let (digest, n) = found.get(&f.path).ok_or_else(|| {
            OfflineError::invalid(&what, format!("is listed in {MANIFEST} but missing"))
        })?;
        if *n != f.size {
            return Err(OfflineError::Mismatch {
                what: format!("{what}: size"),
                expected: f.size.to_string(),
                found: n.to_string(),
            });
        }
        if digest.to_string() != f.sha256 {
            return Err(OfflineError::Mismatch {
                what: format!("{what}: sha256"),
                expected: f.sha256.clone(),
                found: digest.to_string(),
            });
        }
    }
    let listed: std::collections::BTreeSet<&str> =
        m.files.iter().map(|f| f.path.as_str()).collect();
    if let Some(extra) = found.keys().find(|p| !listed.contains(p.as_str())) {
        return Err(OfflineError::invalid(
            format!("{extra} in {}", kit.display()),
            format!("is not in the kit's {MANIFEST}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{KitFile, KitLock, KIT_VERSION};
    use arena_image::NoProgress;

    const FILES: [(&str, &[u8]); 4] = [
        ("bin/arenactl", b"#!/bin/sh\n"),
        ("bundles/cpu.tar", b"bundle"),
        ("bundles/host-tools.tar", b"host bundle"),
        ("share/lockfiles/cpu.lock", b"lock"),
    ];

    fn manifest() -> Vec<u8> {
        let lock = |s: &str| KitLock {
            set: s.into(),
            lockfile: "share/lockfiles/cpu.lock".into(),
            bundle: format!("bundles/{s}.tar"),
        };
        KitManifest {
            version: KIT_VERSION,
            packed_by: "test".into(),
            locks: vec![lock("cpu")],
            host_tools: lock("host-tools"),
            agents: vec![],
            hidden: vec![],
            files: FILES
                .iter()
                .map(|(p, b)| KitFile {
                    path: p.to_string(),
                    sha256: Digest::of_bytes(b).to_string(),
                    size: b.len() as u64,
                    executable: p.starts_with("bin/"),
                })
                .collect(),
        }
        .to_bytes()
        .unwrap()
    }

    /// A kit tar of `entries` (kit path, bytes, entry type).
    fn tar_of(entries: &[(String, Vec<u8>, tar::EntryType)], out: &Path) {
        let mut b = tar::Builder::new(std::fs::File::create(out).unwrap());
        for (path, data, kind) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                h.set_link_name("/etc/passwd").unwrap();
            }
            // Raw names: the builder's own path checks would refuse the hostile ones.
            let name = path.as_bytes();
            h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
            h.set_cksum();
            b.append(&h, &data[..]).unwrap();
        }
        b.finish().unwrap();
    }

    fn good() -> Vec<(String, Vec<u8>, tar::EntryType)> {
        let mut v: Vec<_> = FILES
            .iter()
            .map(|(p, b)| {
                (
                    format!("{KIT_DIR}/{p}"),
                    b.to_vec(),
                    tar::EntryType::Regular,
                )
            })
            .collect();
        v.push((
            format!("{KIT_DIR}/{MANIFEST}"),
            manifest(),
            tar::EntryType::Regular,
        ));
        v
    }

    fn unpack(entries: &[(String, Vec<u8>, tar::EntryType)]) -> Result<(Vec<u8>, KitManifest)> {
        let d = tempfile::tempdir().unwrap();
        tar_of(entries, &d.path().join("kit.tar"));
        std::fs::create_dir(d.path().join("s")).unwrap();
        unpack_kit(&d.path().join("kit.tar"), &d.path().join("s"), &NoProgress)
    }

    #[test]
    fn a_whole_kit_unpacks_from_its_tar_and_from_its_directory() {
        let d = tempfile::tempdir().unwrap();
        tar_of(&good(), &d.path().join("kit.tar"));
        let s = d.path().join("s");
        std::fs::create_dir(&s).unwrap();
        let (bytes, _) = unpack_kit(&d.path().join("kit.tar"), &s, &NoProgress).unwrap();
        assert_eq!(bytes, manifest());
        assert_eq!(
            std::fs::read(s.join("share/lockfiles/cpu.lock")).unwrap(),
            b"lock"
        );
        let mode = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).unwrap().permissions().mode() & 0o777
        };
        assert_eq!(mode(&s.join("bin/arenactl")), 0o755);

        // The same kit extracted: read from its directory, and an unlisted file refused.
        let x = d.path().join("x");
        for (p, b, _) in good() {
            let to = x.join(p.strip_prefix(&format!("{KIT_DIR}/")).unwrap());
            make_parent(&to).unwrap();
            std::fs::write(to, b).unwrap();
        }
        let s2 = d.path().join("s2");
        std::fs::create_dir(&s2).unwrap();
        assert_eq!(unpack_kit(&x, &s2, &NoProgress).unwrap().0, manifest());
        std::fs::write(x.join("share/extra"), "x").unwrap();
        let s3 = d.path().join("s3");
        std::fs::create_dir(&s3).unwrap();
        let err = unpack_kit(&x, &s3, &NoProgress).unwrap_err().to_string();
        assert!(
            err.contains("share/extra") && err.contains("not in the kit"),
            "{err}"
        );
    }

    #[test]
    fn changed_missing_extra_escaping_and_linked_entries_are_refused_by_name() {
        let mut e = good();
        e[3].1 = b"lOck".to_vec();
        let err = unpack(&e).unwrap_err().to_string();
        assert!(
            err.contains("share/lockfiles/cpu.lock in") && err.contains(": sha256"),
            "{err}"
        );

        let mut e = good();
        e[3].1 = b"locks".to_vec();
        let err = unpack(&e).unwrap_err().to_string();
        assert!(
            err.contains("share/lockfiles/cpu.lock") && err.contains("size"),
            "{err}"
        );

        let mut e = good();
        e.remove(1);
        let err = unpack(&e).unwrap_err().to_string();
        assert!(
            err.contains("bundles/cpu.tar") && err.contains("missing"),
            "{err}"
        );

        let mut e = good();
        e.push((
            format!("{KIT_DIR}/share/x"),
            b"x".to_vec(),
            tar::EntryType::Regular,
        ));
        let err = unpack(&e).unwrap_err().to_string();
        assert!(
            err.contains("share/x") && err.contains("not in the kit"),
            "{err}"
        );

        for name in [
            format!("{KIT_DIR}/../escape"),
            "elsewhere/x".to_string(),
            format!("{KIT_DIR}/share/../../x"),
        ] {
            let mut e = good();
            e.insert(0, (name.clone(), b"x".to_vec(), tar::EntryType::Regular));
            let err = unpack(&e).unwrap_err().to_string();
            assert!(err.contains(&name), "{name}: {err}");
        }

        let mut e = good();
        e.insert(
            0,
            (
                format!("{KIT_DIR}/share/link"),
                vec![],
                tar::EntryType::Symlink,
            ),
        );
        let err = unpack(&e).unwrap_err().to_string();
        assert!(
            err.contains("share/link") && err.contains("not a regular file"),
            "{err}"
        );

        let mut e = good();
        e.pop();
        let err = unpack(&e).unwrap_err().to_string();
        assert!(err.contains("not an arena kit"), "{err}");

        let mut e = good();
        e.insert(0, e[1].clone());
        let err = unpack(&e).unwrap_err().to_string();
        assert!(err.contains("twice"), "{err}");

        // A second manifest after the first (a reader keeping the last would check files
        // against one and report the other).
        let mut e = good();
        e.insert(0, e[e.len() - 1].clone());
        let err = unpack(&e).unwrap_err().to_string();
        assert!(err.contains("MANIFEST.json` is in the kit twice"), "{err}");
    }
}
