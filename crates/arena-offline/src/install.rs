//! Installing a kit on the offline node, all or nothing: the kit is read into a staging
//! directory beside the prefix and verified file by file (and against the digest the user
//! carried over); its bundles are imported into the store, every blob checked against its
//! lock and each bundle's lock against the lockfile shipped beside it; every task tree is
//! checked against its lockfile, every hidden set against its seal and every agent file as a
//! run reads it (its mounts included); the host tools are unpacked from their image. Only then
//! does the staging directory become the prefix. A crash before that leaves the prefix
//! untouched (and blobs in the store, which are content-addressed and verified).

use std::path::{Path, PathBuf};

use arena_image::{Lockfile, Progress, Store};
use serde::Serialize;

use crate::error::{OfflineError, Result};
use crate::manifest::{kit_digest, KitManifest, MANIFEST};
use crate::tree::set_executable;
use crate::unpack::unpack_kit;

/// What an install put where.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    pub digest: String,
    pub prefix: PathBuf,
    pub store: PathBuf,
    /// The run lockfiles, where they now lie.
    pub locks: Vec<PathBuf>,
    pub agents: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    pub images: usize,
    pub new_blobs: usize,
    pub files: usize,
}

/// The host tools' binaries an install must find in their image, and how each is reached
/// from `bin/`: a link, or (for those that link libraries the image carries) a script that
/// points the dynamic loader at the image's libraries for that program alone.
/// runc links libseccomp, which it takes from the host: it starts each container by
/// executing itself again with an environment of its own, where a library path set for it
/// is gone (images/host-tools.toml).
const TOOLS: &[(&str, bool)] = &[
    ("usr/bin/containerd", false),
    ("usr/bin/containerd-shim-runc-v2", false),
    ("usr/bin/ctr", false),
    ("usr/sbin/runc", false),
    ("usr/sbin/nft", true),
];
const CNI: &str = "usr/lib/cni";
const LIBS: &str = "usr/lib/x86_64-linux-gnu";

/// Installs `kit` into `prefix` (new, or an empty directory). Its images go into the store at
/// `store`, or, without one, into `PREFIX/store`, so that the prefix holds everything.
pub fn install(
    kit: &Path,
    prefix: &Path,
    store: Option<&Path>,
    expect: Option<&str>,
    progress: &dyn Progress,
) -> Result<Installed> {
    let prefix = absolute(prefix)?;
    check_free(&prefix)?;
    let parent = prefix.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(parent).map_err(|e| OfflineError::io(parent, e))?;
    let staging = tempfile::Builder::new()
        .prefix(".arena-install-")
        .tempdir_in(parent)
        .map_err(|e| OfflineError::io(parent, e))?;
    let s = staging.path();
    // A store in the prefix is opened where the prefix is being staged, and moves with it.
    let (store, store_at) = match store {
        Some(p) => (Store::open(p)?, p.to_path_buf()),
        None => (Store::open(&s.join("store"))?, prefix.join("store")),
    };
    let store = &store;
    let (bytes, m) = unpack_kit(kit, s, progress)?;
    let digest = kit_digest(&bytes).to_string();
    if let Some(want) = expect {
        if want != digest {
            return Err(OfflineError::Mismatch {
                what: format!(
                    "{}: the kit's digest (sha256 of its {MANIFEST})",
                    kit.display()
                ),
                expected: want.to_string(),
                found: digest,
            });
        }
    }
    // Agent files as a run reads them, before anything is imported: each parses, and what it
    // mounts came with it.
    check_agents(s, &m.agents)?;

    let mut images = 0;
    let mut new_blobs = 0;
    let mut host = None;
    for (l, is_host) in m
        .locks
        .iter()
        .map(|l| (l, false))
        .chain([(&m.host_tools, true)])
    {
        let lockfile = s.join(&l.lockfile);
        let shipped = std::fs::read(&lockfile).map_err(|e| OfflineError::io(&lockfile, e))?;
        let imported = arena_image::bundle::import(store, &s.join(&l.bundle), progress)?;
        if imported.lock_bytes != shipped {
            return Err(OfflineError::invalid(
                &l.bundle,
                format!("its lockfile is not the kit's {}", l.lockfile),
            ));
        }
        images += imported.lock.images.len();
        new_blobs += imported.new_blobs;
        let lock = Lockfile::load(&lockfile)?;
        if is_host {
            host = lock.images.first().cloned();
        } else {
            arena_run::plan::load_tasks(&lockfile, &lock, &[])?;
        }
        std::fs::remove_file(s.join(&l.bundle)).map_err(|e| OfflineError::io(&l.bundle, e))?;
    }
    let bundles = s.join("bundles");
    std::fs::remove_dir(&bundles).map_err(|e| OfflineError::io(&bundles, e))?;
    for h in &m.hidden {
        let set = arena_run::HiddenSet::load(&s.join(&h.dir))?;
        if set.digest != h.digest {
            return Err(OfflineError::Mismatch {
                what: format!("hidden set {}", h.dir),
                expected: h.digest.clone(),
                found: set.digest,
            });
        }
    }
    let host = host.ok_or_else(|| OfflineError::invalid(MANIFEST, "no host tools image"))?;
    let host_root = s.join("host");
    std::fs::create_dir(&host_root).map_err(|e| OfflineError::io(&host_root, e))?;
    arena_image::layer::unpack::unpack_layers(store, &host.layers, &host_root)?;
    link_tools(s, &prefix)?;
    check_runc(s)?;
    write_env(s, &prefix, &store_at)?;
    let receipt = s.join(MANIFEST);
    std::fs::write(&receipt, &bytes).map_err(|e| OfflineError::io(&receipt, e))?;

    // The one step that makes the install visible. A prefix made meanwhile by someone else
    // (not empty) fails it: the staging directory then goes.
    let kept = staging.keep();
    if let Err(e) = std::fs::rename(&kept, &prefix) {
        let _ = std::fs::remove_dir_all(&kept);
        return Err(OfflineError::io(&prefix, e));
    }
    let under = |p: &String| prefix.join(p);
    Ok(Installed {
        digest,
        store: store_at,
        locks: m.locks.iter().map(|l| under(&l.lockfile)).collect(),
        agents: m.agents.iter().map(under).collect(),
        hidden: m.hidden.iter().map(|h| under(&h.dir)).collect(),
        images,
        new_blobs,
        files: m.files.len(),
        prefix,
    })
}

/// Each agent file of the kit (`agents`, kit paths in `staging`) as a run reads it, and every
/// host path it mounts inside the kit's `share/`, where packing put what it mounts: a mount
/// anywhere else (the host's files, the kit's hidden sets beside it) would hand an agent what
/// the kit was never meant to give it.
fn check_agents(staging: &Path, agents: &[String]) -> Result<()> {
    if agents.is_empty() {
        return Ok(());
    }
    let share = staging.join("share");
    let share = share
        .canonicalize()
        .map_err(|e| OfflineError::io(&share, e))?;
    for a in agents {
        let agent = arena_run::Agent::load(&staging.join(a))?;
        for (i, mount) in agent.mounts.iter().enumerate() {
            // Agent::load resolved it, links included.
            if !mount.host.starts_with(&share) || mount.host == share {
                return Err(OfflineError::invalid(
                    a,
                    format!(
                        "mount[{i}].host: {} lies outside the kit's share/: an installed agent mounts only what its kit carries",
                        mount.host.display()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks an installed prefix again: every file the kit brought (its bundles excepted, which
/// are now in the store) against its manifest, and every image of its lockfiles in the store.
pub fn verify_installed(store: &Store, prefix: &Path) -> Result<String> {
    let mpath = prefix.join(MANIFEST);
    let bytes = std::fs::read(&mpath).map_err(|e| OfflineError::io(&mpath, e))?;
    let m = KitManifest::parse(&bytes)?;
    let bundles: Vec<&str> = m
        .locks
        .iter()
        .chain([&m.host_tools])
        .map(|l| l.bundle.as_str())
        .collect();
    for f in m
        .files
        .iter()
        .filter(|f| !bundles.contains(&f.path.as_str()))
    {
        let path = prefix.join(&f.path);
        let file = std::fs::File::open(&path).map_err(|e| OfflineError::io(&path, e))?;
        let mut r = arena_digest::HashingReader::new(file);
        std::io::copy(&mut r, &mut std::io::sink()).map_err(|e| OfflineError::io(&path, e))?;
        let (d, n) = r.finish();
        if d.to_string() != f.sha256 || n != f.size {
            return Err(OfflineError::Mismatch {
                what: path.display().to_string(),
                expected: format!("{} ({} bytes)", f.sha256, f.size),
                found: format!("{d} ({n} bytes)"),
            });
        }
    }
    for l in m.locks.iter().chain([&m.host_tools]) {
        let lock = Lockfile::load(&prefix.join(&l.lockfile))?;
        for img in &lock.images {
            let blobs = [
                (&img.manifest, img.manifest_size),
                (&img.config, img.config_size),
            ]
            .into_iter()
            .chain(img.layers.iter().map(|l| (&l.digest, l.size)));
            for (d, size) in blobs {
                store.verify_blob(d, Some(size))?;
            }
        }
    }
    Ok(kit_digest(&bytes).to_string())
}

fn absolute(p: &Path) -> Result<PathBuf> {
    let name = p
        .file_name()
        .ok_or_else(|| OfflineError::invalid(p.display(), "a prefix needs a directory name"))?;
    let parent = match p.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| OfflineError::io(&parent, e))?;
    let parent = parent
        .canonicalize()
        .map_err(|e| OfflineError::io(&parent, e))?;
    Ok(parent.join(name))
}

fn check_free(prefix: &Path) -> Result<()> {
    let empty = match std::fs::read_dir(prefix) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(OfflineError::io(prefix, e)),
        Ok(mut entries) => entries.next().is_none(),
    };
    if empty {
        Ok(())
    } else {
        Err(OfflineError::invalid(
            prefix.display(),
            "exists and is not empty: a kit installs into a new prefix, never over another",
        ))
    }
}

/// `bin/` beside arenactl: each host tool, so that one PATH entry finds them all (containerd
/// finds its shim, and the shim runc, by PATH).
fn link_tools(staging: &Path, prefix: &Path) -> Result<()> {
    let bin = staging.join("bin");
    for (tool, needs_libs) in TOOLS {
        let target = staging.join("host").join(tool);
        if !target.is_file() {
            return Err(OfflineError::invalid(
                MANIFEST,
                format!("the host tools image has no /{tool}"),
            ));
        }
        let name = Path::new(tool).file_name().expect("a tool has a name");
        let at = bin.join(name);
        if *needs_libs {
            let script = format!(
                "#!/bin/sh\n# arena offline install: /{tool} of the host tools, with their libraries.\n\
                 LD_LIBRARY_PATH={libs} exec {real} \"$@\"\n",
                libs = prefix.join("host").join(LIBS).display(),
                real = prefix.join("host").join(tool).display(),
            );
            std::fs::write(&at, script).map_err(|e| OfflineError::io(&at, e))?;
            set_executable(&at, true)?;
        } else {
            let rel = Path::new("../host").join(tool);
            std::os::unix::fs::symlink(&rel, &at).map_err(|e| OfflineError::io(&at, e))?;
        }
    }
    Ok(())
}

/// runc starts on this host: its one library the kit does not carry, libseccomp, is here.
fn check_runc(staging: &Path) -> Result<()> {
    let runc = staging.join("host/usr/sbin/runc");
    let out = std::process::Command::new(&runc)
        .arg("--version")
        .output()
        .map_err(|e| OfflineError::io(&runc, e))?;
    if out.status.success() {
        return Ok(());
    }
    Err(OfflineError::invalid(
        "runc (host tools)",
        format!(
            "does not start on this host ({}): it needs libseccomp.so.2 from the host (Debian: \
             libseccomp2, RHEL: libseccomp) and glibc 2.36 or later",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    ))
}

/// `etc/arena.env` (KEY=VALUE lines, for a systemd unit's EnvironmentFile) and `env.sh`
/// (which a shell sources).
fn write_env(staging: &Path, prefix: &Path, store: &Path) -> Result<()> {
    let etc = staging.join("etc");
    std::fs::create_dir_all(&etc).map_err(|e| OfflineError::io(&etc, e))?;
    let env = format!(
        "# arena, installed from an offline kit: the tools of this prefix first, its CNI plugins\n\
         # for the agents' egress network, and the store the kit's images were imported into.\n\
         PATH={bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n\
         ARENA_CNI_PATH={cni}\nARENA_STORE={store}\n",
        bin = prefix.join("bin").display(),
        cni = prefix.join("host").join(CNI).display(),
        store = store.display(),
    );
    let path = etc.join("arena.env");
    std::fs::write(&path, env).map_err(|e| OfflineError::io(&path, e))?;
    let sh = format!(
        "# . {}/env.sh\nset -a\n. {}\nset +a\n",
        prefix.display(),
        prefix.join("etc/arena.env").display()
    );
    let path = staging.join("env.sh");
    std::fs::write(&path, sh).map_err(|e| OfflineError::io(&path, e))
}

#[cfg(test)]
mod tests;
