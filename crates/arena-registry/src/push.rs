//! Push: a stored image (manifest, config, layers) to `registry/repository[:tag]`, blobs the
//! registry lacks streamed from the store, the manifest as its exact stored bytes — so the
//! digest the registry names is the one arena computed, and is checked to be.

use arena_image::digest::Digest;
use arena_image::{Progress, Store};
use futures_util::StreamExt;
use oci_client::RegistryOperation;
use serde::{Deserialize, Serialize};

use crate::client::Registry;
use crate::error::{classify, RegistryError, Result};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pushed {
    /// `registry/repository@sha256:…`: pull this and get these bytes.
    pub reference: String,
    pub manifest: Digest,
    pub pushed_blobs: usize,
    pub pushed_bytes: u64,
    /// Blobs the registry already had.
    pub present_blobs: usize,
}

#[derive(Deserialize)]
struct Desc {
    digest: String,
    size: u64,
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    config: Desc,
    #[serde(default)]
    layers: Vec<Desc>,
}

impl Registry {
    /// Pushes the stored image `manifest` to `reference` (a tag or a bare repository).
    pub async fn push(
        &self,
        store: &Store,
        manifest: &Digest,
        reference: &str,
        progress: &dyn Progress,
    ) -> Result<Pushed> {
        let e = self.endpoint(reference)?;
        if let Some(d) = e.reference.digest() {
            if d != manifest.as_str() {
                return Err(RegistryError::Reference {
                    reference: reference.to_string(),
                    message: format!("names {d}, but the image to push is {manifest}"),
                });
            }
        }
        let bytes = store.read_blob(manifest)?;
        let what = format!("manifest {manifest}");
        let m: Manifest = serde_json::from_slice(&bytes).map_err(|x| RegistryError::Protocol {
            what: what.clone(),
            message: format!("not an image manifest in the store: {x}"),
        })?;
        let auth = self
            .credentials
            .for_registry(e.reference.resolve_registry());
        // Checking for blobs is a pull; sending them a push: both are authorized up front.
        for op in [RegistryOperation::Pull, RegistryOperation::Push] {
            e.client
                .auth(&e.reference, &auth, op)
                .await
                .map_err(|x| classify(x, &self.target(&e, format!("push to {reference}"))))?;
        }
        let mut blobs = vec![m.config];
        blobs.extend(m.layers);
        let mut todo = Vec::new();
        let mut present = 0;
        for b in blobs {
            let d = Digest::parse(&b.digest).map_err(|x| RegistryError::Protocol {
                what: what.clone(),
                message: x.to_string(),
            })?;
            // The registry hashes what it receives and refuses an upload whose content is not
            // the digest named (the distribution spec's rule), so a store file changed on
            // disk cannot be published under the old name; its size is checked here.
            let path = store.blob_path(&d);
            let len = std::fs::metadata(&path)
                .map_err(|x| arena_image::ImageError::io(&path, x))?
                .len();
            if len != b.size {
                return Err(RegistryError::SizeMismatch {
                    what: format!("blob {d} in {}", store.root().display()),
                    expected: b.size,
                    found: len,
                });
            }
            let there = e
                .client
                .blob_exists(&e.reference, d.as_str())
                .await
                .map_err(|x| classify(x, &self.target(&e, format!("blob {d}"))))?;
            if there {
                present += 1;
            } else {
                todo.push((d, b.size));
            }
        }
        let total: u64 = todo.iter().map(|t| t.1).sum();
        progress.phase(&format!("pushing to {reference}"), Some(total));
        for (d, size) in &todo {
            let f = tokio::fs::File::open(store.blob_path(d))
                .await
                .map_err(|x| arena_image::ImageError::io(store.blob_path(d), x))?;
            let stream = tokio_util::io::ReaderStream::with_capacity(f, 1 << 20)
                .map(|c| c.map_err(oci_client::errors::OciDistributionError::IoError));
            e.client
                .push_blob_stream(&e.reference, stream, d.as_str(), Some(*size))
                .await
                .map_err(|x| classify(x, &self.target(&e, format!("blob {d}"))))?;
            progress.advance(*size);
        }
        progress.finish_phase();
        let media_type = m
            .media_type
            .unwrap_or_else(|| "application/vnd.oci.image.manifest.v1+json".into());
        let content_type = media_type.parse().map_err(|_| RegistryError::Protocol {
            what: what.clone(),
            message: format!("media type `{media_type}` is not a header value"),
        })?;
        e.client
            .push_manifest_raw(&e.reference, bytes.clone(), content_type)
            .await
            .map_err(|x| classify(x, &self.target(&e, what.clone())))?;
        // What the registry now serves under the tag must be these bytes.
        let served = e
            .client
            .fetch_manifest_digest(&e.reference, &auth)
            .await
            .map_err(|x| classify(x, &self.target(&e, what.clone())))?;
        if served != manifest.as_str() {
            return Err(RegistryError::DigestMismatch {
                what: format!("{reference} after the push"),
                expected: manifest.to_string(),
                found: served,
            });
        }
        Ok(Pushed {
            reference: format!("{}/{}@{manifest}", e.origin, e.reference.repository()),
            manifest: manifest.clone(),
            pushed_blobs: todo.len(),
            pushed_bytes: total,
            present_blobs: present,
        })
    }
}
