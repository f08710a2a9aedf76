//! Writing a kit: the bundles of each lockfile exported from the store, then every file in
//! kit-path order into one tar (mode 0755 or 0644, owner 0, mtime 0), hashed as it is copied,
//! and the manifest last. The same inputs give the same bytes, so the same kit digest.

use std::io::Read;
use std::path::Path;

use arena_digest::HashingReader;
use arena_image::bundle::Counted;
use arena_image::{Progress, Store};

use crate::collect::{collect, PackInputs, Source};
use crate::error::{OfflineError, Result};
use crate::manifest::{kit_digest, KitFile, KitManifest, KIT_DIR, KIT_VERSION, MANIFEST};

/// What `pack` wrote.
#[derive(Debug, Clone)]
pub struct Packed {
    /// `sha256:` of the manifest: give it to `install --expect` on the other side.
    pub digest: String,
    pub manifest: KitManifest,
    pub bytes: u64,
}

pub fn pack(
    store: &Store,
    inputs: &PackInputs,
    out: &Path,
    progress: &dyn Progress,
) -> Result<Packed> {
    let mut c = collect(inputs)?;
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let bundles = tempfile::Builder::new()
        .prefix(".kit-bundles-")
        .tempdir_in(dir)
        .map_err(|e| OfflineError::io(dir, e))?;
    let all = c.locks.iter().chain(std::iter::once(&c.host_tools));
    for (lockfile, entry) in all {
        let file = bundles.path().join(format!("{}.tar", entry.set));
        arena_image::bundle::export(store, lockfile, &file, progress)?;
        c.files.insert(
            entry.bundle.clone(),
            Source {
                from: file,
                executable: false,
            },
        );
    }

    let tmp = tempfile::Builder::new()
        .prefix(".kit-")
        .tempfile_in(dir)
        .map_err(|e| OfflineError::io(dir, e))?;
    let total: u64 = c
        .files
        .values()
        .map(|s| std::fs::metadata(&s.from).map_or(0, |m| m.len()))
        .sum();
    progress.phase("packing", Some(total));
    let mut b = tar::Builder::new(std::io::BufWriter::with_capacity(1 << 20, tmp.as_file()));
    let mut files = Vec::new();
    for (kit, source) in &c.files {
        let f = std::fs::File::open(&source.from).map_err(|e| OfflineError::io(&source.from, e))?;
        let size = f
            .metadata()
            .map_err(|e| OfflineError::io(&source.from, e))?
            .len();
        let mut r = HashingReader::new(Counted {
            inner: f.take(size),
            progress,
        });
        b.append_data(
            &mut header(size, source.executable),
            format!("{KIT_DIR}/{kit}"),
            &mut r,
        )
        .map_err(|e| OfflineError::io(&source.from, e))?;
        let (digest, n) = r.finish();
        if n != size {
            return Err(OfflineError::invalid(
                source.from.display(),
                format!("changed while it was packed ({n} of {size} bytes read)"),
            ));
        }
        files.push(KitFile {
            path: kit.clone(),
            sha256: digest.to_string(),
            size,
            executable: source.executable,
        });
    }
    progress.finish_phase();
    let manifest = KitManifest {
        version: KIT_VERSION,
        packed_by: env!("CARGO_PKG_VERSION").to_string(),
        locks: c.locks.iter().map(|(_, l)| l.clone()).collect(),
        host_tools: c.host_tools.1.clone(),
        agents: c.agents.clone(),
        hidden: c.hidden.clone(),
        files,
    };
    let bytes = manifest.to_bytes()?;
    b.append_data(
        &mut header(bytes.len() as u64, false),
        format!("{KIT_DIR}/{MANIFEST}"),
        &bytes[..],
    )
    .map_err(|e| OfflineError::io(out, e))?;
    let io = |e| OfflineError::io(out, e);
    b.into_inner()
        .map_err(io)?
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    tmp.as_file().sync_all().map_err(io)?;
    // A kit is read by whoever installs it (a temporary file is the writer's alone).
    crate::tree::set_executable(tmp.path(), false)?;
    tmp.persist(out)
        .map_err(|e| OfflineError::io(out, e.error))?;
    Ok(Packed {
        digest: kit_digest(&bytes).to_string(),
        bytes: std::fs::metadata(out).map_err(io)?.len(),
        manifest,
    })
}

/// A bundle's header (owner 0, mtime 0), executable where the file is.
fn header(size: u64, executable: bool) -> tar::Header {
    let mut h = arena_image::bundle::header(size);
    if executable {
        h.set_mode(0o755);
    }
    h
}
