//! Base images: scratch, an OCI image layout on disk (directory or tar) pinned by manifest
//! digest, or a registry reference pinned by digest whose blobs are already in the store.
//! Every blob copied from a layout is verified against its digest and its descriptor's size.

use std::io::Read;
use std::path::Path;

use oci_spec::image::{ImageConfiguration, ImageManifest};

use crate::digest::{Digest, HashingWriter};
use crate::error::{ImageError, Result};
use crate::progress::Progress;
use crate::record::LayerRecord;
use crate::store::Store;

/// A resolved base: what the new image builds on.
pub struct BaseImage {
    /// `scratch` or the base manifest digest.
    pub id: String,
    pub layers: Vec<LayerRecord>,
    pub config: Option<ImageConfiguration>,
}

impl BaseImage {
    pub fn scratch() -> BaseImage {
        BaseImage {
            id: "scratch".into(),
            layers: Vec::new(),
            config: None,
        }
    }
}

/// Reads a manifest and its config from the store, verifying both, into a base.
pub fn base_from_store(store: &Store, manifest: &Digest) -> Result<BaseImage> {
    let bytes = store.read_blob(manifest)?;
    let m: ImageManifest = serde_json::from_slice(&bytes).map_err(|e| {
        ImageError::invalid(
            format!("manifest {manifest}"),
            format!("not an OCI image manifest ({e}); a multi-platform index must be pinned by the digest of its linux/amd64 manifest"),
        )
    })?;
    let cd = Digest::parse(m.config().digest().as_ref())?;
    let config_bytes = store.read_blob(&cd)?;
    let config: ImageConfiguration = serde_json::from_slice(&config_bytes)
        .map_err(|e| ImageError::invalid(format!("config {cd}"), e.to_string()))?;
    let diff_ids = config.rootfs().diff_ids();
    if diff_ids.len() != m.layers().len() {
        return Err(ImageError::invalid(
            format!("manifest {manifest}"),
            format!(
                "{} layers but the config lists {} diff_ids",
                m.layers().len(),
                diff_ids.len()
            ),
        ));
    }
    let mut layers = Vec::new();
    for (l, diff) in m.layers().iter().zip(diff_ids) {
        let d = Digest::parse(l.digest().as_ref())?;
        store.verify_blob(&d, Some(l.size()))?;
        layers.push(LayerRecord {
            digest: d,
            diff_id: Digest::parse(diff)?,
            size: l.size(),
            media_type: l.media_type().to_string(),
        });
    }
    Ok(BaseImage {
        id: manifest.to_string(),
        layers,
        config: Some(config),
    })
}

/// Copies the blobs of a pinned manifest from an OCI layout (directory or tar) into the store.
pub fn import_layout(
    store: &Store,
    layout: &Path,
    manifest: &Digest,
    progress: &dyn Progress,
) -> Result<BaseImage> {
    if !layout.exists() {
        return Err(ImageError::Missing {
            path: layout.to_path_buf(),
            what: "base image OCI layout (import it first, e.g. `skopeo copy docker://IMAGE@DIGEST oci:DIR`)".into(),
        });
    }
    if layout.is_dir() {
        let blob = |d: &Digest| layout.join("blobs/sha256").join(d.hex());
        copy_verified(store, &blob(manifest), manifest, None, progress)?;
        let bytes = store.read_blob(manifest)?;
        let m: ImageManifest = serde_json::from_slice(&bytes).map_err(|e| {
            ImageError::invalid(
                format!("manifest {manifest} in {}", layout.display()),
                e.to_string(),
            )
        })?;
        let cd = Digest::parse(m.config().digest().as_ref())?;
        copy_verified(store, &blob(&cd), &cd, Some(m.config().size()), progress)?;
        for l in m.layers() {
            let d = Digest::parse(l.digest().as_ref())?;
            copy_verified(store, &blob(&d), &d, Some(l.size()), progress)?;
        }
    } else {
        import_layout_tar(store, layout, progress)?;
        if !store.has_blob(manifest) {
            return Err(ImageError::Missing {
                path: layout.to_path_buf(),
                what: format!("manifest {manifest} (the pinned digest is not in this layout)"),
            });
        }
    }
    base_from_store(store, manifest)
}

fn copy_verified(
    store: &Store,
    src: &Path,
    digest: &Digest,
    size: Option<u64>,
    progress: &dyn Progress,
) -> Result<()> {
    if store.has_blob(digest) {
        return Ok(());
    }
    let f = std::fs::File::open(src).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ImageError::Missing {
                path: src.to_path_buf(),
                what: format!("blob {digest}"),
            }
        } else {
            ImageError::io(src, e)
        }
    })?;
    stage_verified(store, f, src, digest, size, progress)
}

/// Streams `r` into the store, refusing it unless it hashes to `digest` (and has `size`).
pub fn stage_verified<R: Read>(
    store: &Store,
    mut r: R,
    what: &Path,
    digest: &Digest,
    size: Option<u64>,
    progress: &dyn Progress,
) -> Result<()> {
    let (tmp, file) = store.staging_file()?;
    let mut w = HashingWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
    let mut buf = vec![0u8; 1 << 20];
    let result = (|| -> std::io::Result<()> {
        loop {
            let n = r.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            std::io::Write::write_all(&mut w, &buf[..n])?;
            progress.advance(n as u64);
        }
    })();
    let (bw, found, n) = w.into_parts();
    drop(bw);
    let fail = |e: ImageError| {
        let _ = std::fs::remove_file(&tmp);
        Err(e)
    };
    if let Err(e) = result {
        return fail(ImageError::Archive {
            path: what.to_path_buf(),
            message: format!("blob {digest}: {e}"),
        });
    }
    if &found != digest {
        return fail(ImageError::DigestMismatch {
            what: format!("blob {digest} from {}", what.display()),
            expected: digest.to_string(),
            found: found.to_string(),
        });
    }
    if let Some(s) = size {
        if s != n {
            return fail(ImageError::SizeMismatch {
                what: format!("blob {digest} from {}", what.display()),
                expected: s,
                found: n,
            });
        }
    }
    store.commit_staged(&tmp, digest)
}

/// Copies every `blobs/sha256/*` entry of a layout tar into the store, verifying each.
fn import_layout_tar(store: &Store, path: &Path, progress: &dyn Progress) -> Result<()> {
    let f = std::fs::File::open(path).map_err(|e| ImageError::io(path, e))?;
    let mut ar = tar::Archive::new(std::io::BufReader::new(f));
    for entry in ar.entries().map_err(|e| ImageError::io(path, e))? {
        let entry = entry.map_err(|e| ImageError::Archive {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let name = name.trim_start_matches("./");
        if let Some(hex) = name.strip_prefix("blobs/sha256/") {
            let d = Digest::parse(&format!("sha256:{hex}"))?;
            if !store.has_blob(&d) {
                stage_verified(store, entry, path, &d, None, progress)?;
            }
        }
    }
    Ok(())
}
