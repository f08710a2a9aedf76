//! The kit's manifest: every file the kit holds, by its path inside the kit, with its sha256,
//! size and whether it is executable; what the files are (lockfiles and their bundles, the
//! host tools, agents, hidden sets). Written as canonical JSON; the kit's digest is the sha256
//! of those bytes.

use std::path::{Component, Path};

use arena_digest::Digest;
use serde::{Deserialize, Serialize};

use crate::error::{OfflineError, Result};

/// The one directory every entry of a kit's tar lies under.
pub const KIT_DIR: &str = "arena-offline";
/// The manifest's name inside [`KIT_DIR`].
pub const MANIFEST: &str = "MANIFEST.json";
pub const KIT_VERSION: u32 = 1;
/// The directories a kit's files lie in.
pub const KIT_TOPS: [&str; 4] = ["bin", "bundles", "hidden", "share"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KitManifest {
    pub version: u32,
    /// The arenactl version that packed it (the binary itself is `bin/arenactl`).
    pub packed_by: String,
    /// The lockfiles of the runs the kit carries, each with the bundle of its images.
    pub locks: Vec<KitLock>,
    /// The lockfile of the host tools, with its bundle.
    pub host_tools: KitLock,
    /// Agent files (kit paths).
    pub agents: Vec<String>,
    /// Sealed hidden sets, each with the digest it was sealed with.
    pub hidden: Vec<KitHidden>,
    /// Every other file of the kit, sorted by path.
    pub files: Vec<KitFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KitLock {
    pub set: String,
    /// Kit path of the lockfile (under `share/`, where its sets file and tasks lie as they
    /// did beside it).
    pub lockfile: String,
    /// Kit path of the bundle of its images.
    pub bundle: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KitHidden {
    pub dir: String,
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KitFile {
    pub path: String,
    pub sha256: String,
    pub size: u64,
    pub executable: bool,
}

impl KitManifest {
    /// The manifest's bytes as written into the kit (canonical JSON: sorted keys, no spaces).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        Ok(arena_image::canonical::canonical_json(self)?)
    }

    /// Reads a manifest and checks that it is one this arenactl can install: its version,
    /// every path a plain relative one, no path twice, and every file it names as a lockfile,
    /// bundle or agent listed among its files.
    pub fn parse(bytes: &[u8]) -> Result<KitManifest> {
        let m: KitManifest = serde_json::from_slice(bytes)
            .map_err(|e| OfflineError::invalid(MANIFEST, format!("not a kit manifest: {e}")))?;
        if m.version != KIT_VERSION {
            return Err(OfflineError::invalid(
                MANIFEST,
                format!(
                    "kit version {} (this arenactl installs version {KIT_VERSION})",
                    m.version
                ),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &m.files {
            check_kit_path(&f.path)?;
            // An install writes the rest of the prefix itself (host/, etc/, store/, env.sh).
            let top = f.path.split('/').next().unwrap_or_default();
            if !KIT_TOPS.contains(&top) || !f.path.contains('/') {
                return Err(OfflineError::invalid(
                    MANIFEST,
                    format!(
                        "`{}` is not under {} (the directories a kit holds)",
                        f.path,
                        KIT_TOPS.join("/, ")
                    ),
                ));
            }
            if !seen.insert(f.path.as_str()) {
                return Err(OfflineError::invalid(
                    MANIFEST,
                    format!("`{}` is listed twice", f.path),
                ));
            }
            Digest::parse(&f.sha256).map_err(|e| {
                OfflineError::invalid(MANIFEST, format!("`{}`: sha256: {e}", f.path))
            })?;
        }
        let named = m
            .locks
            .iter()
            .chain(std::iter::once(&m.host_tools))
            .flat_map(|l| [&l.lockfile, &l.bundle])
            .chain(&m.agents);
        for p in named {
            if !seen.contains(p.as_str()) {
                return Err(OfflineError::invalid(
                    MANIFEST,
                    format!("`{p}` is named but not among the kit's files"),
                ));
            }
        }
        let bundles: std::collections::BTreeSet<&str> = m
            .locks
            .iter()
            .chain(std::iter::once(&m.host_tools))
            .map(|l| l.bundle.as_str())
            .collect();
        if let Some(f) = m
            .files
            .iter()
            .find(|f| f.path.starts_with("bundles/") != bundles.contains(f.path.as_str()))
        {
            return Err(OfflineError::invalid(
                MANIFEST,
                format!(
                    "`{}`: bundles/ holds the bundles of the kit's lockfiles, and only those",
                    f.path
                ),
            ));
        }
        for h in &m.hidden {
            check_kit_path(&h.dir)?;
        }
        Ok(m)
    }

    pub fn file(&self, path: &str) -> Option<&KitFile> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// The kit's digest: `sha256:` of the manifest's bytes.
pub fn kit_digest(manifest_bytes: &[u8]) -> Digest {
    Digest::of_bytes(manifest_bytes)
}

/// A path inside the kit: relative, `/`-separated, no `.`, `..` or empty part.
pub fn check_kit_path(p: &str) -> Result<()> {
    let ok = !p.is_empty()
        && !p.contains('\\')
        && Path::new(p)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        && !p.split('/').any(|s| s.is_empty() || s == "." || s == "..");
    if ok {
        Ok(())
    } else {
        Err(OfflineError::invalid(
            MANIFEST,
            format!("`{p}` is not a plain relative path inside the kit"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> KitManifest {
        let lock = |s: &str| KitLock {
            set: s.into(),
            lockfile: format!("share/lockfiles/{s}.lock"),
            bundle: format!("bundles/{s}.tar"),
        };
        let file = |p: &str| KitFile {
            path: p.into(),
            sha256: Digest::of_bytes(p.as_bytes()).to_string(),
            size: 1,
            executable: false,
        };
        KitManifest {
            version: KIT_VERSION,
            packed_by: "0.1.0".into(),
            locks: vec![lock("cpu")],
            host_tools: lock("host-tools"),
            agents: vec!["share/ci/agents/optimize.toml".into()],
            hidden: vec![],
            files: [
                "bin/arenactl",
                "bundles/cpu.tar",
                "bundles/host-tools.tar",
                "share/ci/agents/optimize.toml",
                "share/lockfiles/cpu.lock",
                "share/lockfiles/host-tools.lock",
            ]
            .map(file)
            .to_vec(),
        }
    }

    #[test]
    fn a_manifest_round_trips_byte_for_byte() {
        let b = sample().to_bytes().unwrap();
        let m = KitManifest::parse(&b).unwrap();
        assert_eq!(m, sample());
        assert_eq!(m.to_bytes().unwrap(), b);
        assert_eq!(kit_digest(&b), Digest::of_bytes(&b));
    }

    #[test]
    fn paths_outside_the_kit_are_refused() {
        for p in [
            "../etc/passwd",
            "/etc/passwd",
            "a/../../b",
            "a//b",
            "./a",
            "",
        ] {
            assert!(check_kit_path(p).is_err(), "{p}");
            let mut m = sample();
            m.files[0].path = p.into();
            let err = KitManifest::parse(&m.to_bytes().unwrap()).unwrap_err();
            assert!(err.to_string().contains("MANIFEST.json"), "{err}");
        }
        assert!(check_kit_path("share/tasks/a b/c.py").is_ok());
        // Inside the kit, but where an install writes its own files.
        for p in ["store/blobs/sha256/00", "env.sh", "host/usr/bin/runc"] {
            let mut m = sample();
            m.files[0].path = p.into();
            let err = KitManifest::parse(&m.to_bytes().unwrap()).unwrap_err();
            assert!(err.to_string().contains("not under bin/"), "{err}");
        }
    }

    #[test]
    fn a_named_file_the_kit_lacks_a_duplicate_and_another_version_are_refused() {
        let mut m = sample();
        m.files.retain(|f| f.path != "bundles/cpu.tar");
        let err = KitManifest::parse(&m.to_bytes().unwrap()).unwrap_err();
        assert!(err.to_string().contains("bundles/cpu.tar"), "{err}");

        let mut m = sample();
        m.files.push(m.files[0].clone());
        let err = KitManifest::parse(&m.to_bytes().unwrap()).unwrap_err();
        assert!(err.to_string().contains("listed twice"), "{err}");

        let mut m = sample();
        m.locks[0].bundle = "share/cpu.tar".into();
        m.files.push(KitFile {
            path: "share/cpu.tar".into(),
            ..m.files[0].clone()
        });
        let err = KitManifest::parse(&m.to_bytes().unwrap()).unwrap_err();
        assert!(err.to_string().contains("bundles/ holds"), "{err}");

        let mut m = sample();
        m.version = 2;
        let err = KitManifest::parse(&m.to_bytes().unwrap()).unwrap_err();
        assert!(err.to_string().contains("kit version 2"), "{err}");

        let err = KitManifest::parse(b"{\"version\":1}").unwrap_err();
        assert!(err.to_string().contains("not a kit manifest"), "{err}");
    }
}
