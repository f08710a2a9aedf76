//! Pull: resolve a reference to one platform's image manifest (by tag the first time, by
//! digest from then on), then stream every missing blob into the store, hashing as it comes.
//! A blob enters the store only under the digest and size its descriptor names; the manifest
//! enters last, so a store that holds a manifest holds its blobs, whatever failed midway.

use std::io::Write;

use arena_image::digest::{Digest, HashingWriter};
use arena_image::{Progress, Store};
use futures_util::StreamExt;
use oci_client::manifest::OciDescriptor;
use oci_client::Reference;
use serde::{Deserialize, Serialize};

use crate::client::{Endpoint, Registry};
use crate::error::{chain, classify, RegistryError, Result};

/// The manifest kinds arena accepts: OCI and Docker schema 2, images and indexes.
pub const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// A reference resolved to one image manifest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resolved {
    /// `registry/repository@sha256:…` (the registry as named, not a mirror): the pin to write
    /// into a recipe.
    pub reference: String,
    pub manifest: Digest,
    /// The multi-platform index the manifest was chosen from, if the reference named one.
    pub index: Option<Digest>,
    pub platform: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pulled {
    #[serde(flatten)]
    pub resolved: Resolved,
    /// Blobs fetched, and blobs the store already held.
    pub fetched_blobs: usize,
    pub fetched_bytes: u64,
    pub present_blobs: usize,
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    platform: Option<PlatformSpec>,
}

#[derive(Deserialize)]
struct PlatformSpec {
    os: String,
    architecture: String,
    #[serde(default)]
    variant: Option<String>,
}

/// An image manifest or an index, by the fields arena reads.
#[derive(Deserialize)]
struct ManifestDoc {
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
}

impl ManifestDoc {
    fn is_index(&self) -> bool {
        self.manifests.is_some()
            || self
                .media_type
                .as_deref()
                .is_some_and(|m| m.contains("index") || m.contains("manifest.list"))
    }
}

fn parse_digest(what: &str, s: &str) -> Result<Digest> {
    Digest::parse(s).map_err(|e| RegistryError::Protocol {
        what: what.to_string(),
        message: format!("`{s}` is not a sha256 digest ({e})"),
    })
}

impl Registry {
    /// One manifest's bytes, refused unless they hash to `pinned` where one is given.
    async fn fetch_manifest(
        &self,
        e: &Endpoint,
        r: &Reference,
        pinned: Option<&Digest>,
    ) -> Result<(Vec<u8>, Digest, ManifestDoc)> {
        let what = format!("manifest {}", r.whole());
        let auth = self.credentials.for_registry(r.resolve_registry());
        let (bytes, _) = e
            .client
            .pull_manifest_raw(r, &auth, MANIFEST_TYPES)
            .await
            .map_err(|x| classify(x, &self.target(e, what.clone())))?;
        let found = Digest::of_bytes(&bytes);
        if let Some(want) = pinned {
            if &found != want {
                return Err(RegistryError::DigestMismatch {
                    what,
                    expected: want.to_string(),
                    found: found.to_string(),
                });
            }
        }
        let doc: ManifestDoc =
            serde_json::from_slice(&bytes).map_err(|x| RegistryError::Protocol {
                what: what.clone(),
                message: format!("not a manifest: {x}"),
            })?;
        Ok((bytes.to_vec(), found, doc))
    }

    /// Resolves to one image manifest: an index is narrowed to the configured platform.
    async fn manifests(
        &self,
        reference: &str,
    ) -> Result<(Endpoint, Resolved, Vec<u8>, ManifestDoc, Option<Vec<u8>>)> {
        let e = self.endpoint(reference)?;
        let pinned = match e.reference.digest() {
            Some(d) => Some(Digest::parse(d).map_err(|x| RegistryError::Reference {
                reference: reference.to_string(),
                message: x.to_string(),
            })?),
            None => None,
        };
        let (os, arch) = self.platform();
        let platform = format!("{os}/{arch}");
        let pin = |d: &Digest| format!("{}/{}@{d}", e.origin, e.reference.repository());
        let top = e.reference.clone();
        let (bytes, digest, doc) = self.fetch_manifest(&e, &top, pinned.as_ref()).await?;
        if !doc.is_index() {
            let resolved = Resolved {
                reference: pin(&digest),
                manifest: digest,
                index: None,
                platform,
            };
            return Ok((e, resolved, bytes, doc, None));
        }
        let entries = doc.manifests.unwrap_or_default();
        let chosen = entries
            .iter()
            .find(|m| {
                m.platform.as_ref().is_some_and(|p| {
                    p.os == os
                        && p.architecture == arch
                        && p.variant.as_deref().unwrap_or("") != "unknown"
                })
            })
            .ok_or_else(|| RegistryError::NotFound {
                what: format!("{platform} image in index {digest} of {reference}"),
                message: format!(
                    "the index lists {}",
                    entries
                        .iter()
                        .filter_map(|m| m
                            .platform
                            .as_ref()
                            .map(|p| format!("{}/{}", p.os, p.architecture)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })?;
        let md = parse_digest(&format!("index {digest}"), &chosen.digest)?;
        let mr = e.reference.clone_with_digest(md.to_string());
        let (mbytes, _, mdoc) = self.fetch_manifest(&e, &mr, Some(&md)).await?;
        if mdoc.is_index() {
            return Err(RegistryError::Protocol {
                what: format!("manifest {md}"),
                message: "an index inside an index: arena pins one platform's image manifest"
                    .into(),
            });
        }
        let resolved = Resolved {
            reference: pin(&md),
            manifest: md,
            index: Some(digest),
            platform,
        };
        Ok((e, resolved, mbytes, mdoc, Some(bytes)))
    }

    /// A tag (or digest) resolved to the pinned reference, fetching manifests only.
    pub async fn resolve(&self, reference: &str) -> Result<Resolved> {
        Ok(self.manifests(reference).await?.1)
    }

    /// Pulls `reference` into `store`: every missing blob verified while streaming, then the
    /// manifest (and index), then a store name for the pinned reference.
    pub async fn pull(
        &self,
        reference: &str,
        store: &Store,
        progress: &dyn Progress,
    ) -> Result<Pulled> {
        let (e, resolved, mbytes, doc, index) = self.manifests(reference).await?;
        let what = format!("manifest {}", resolved.manifest);
        let config = doc.config.ok_or_else(|| RegistryError::Protocol {
            what: what.clone(),
            message: "no config descriptor".into(),
        })?;
        let mut blobs = vec![config];
        blobs.extend(doc.layers);
        let mut missing = Vec::new();
        let mut present = 0;
        for b in &blobs {
            let d = parse_digest(&what, &b.digest)?;
            if store.has_blob(&d) {
                present += 1;
            } else {
                missing.push((d, b.size, b.media_type.clone()));
            }
        }
        let total: u64 = missing.iter().map(|m| m.1).sum();
        progress.phase(&format!("pulling {}", resolved.reference), Some(total));
        for (d, size, media_type) in &missing {
            self.fetch_blob(&e, d, *size, media_type, store, progress)
                .await?;
        }
        progress.finish_phase();
        if let Some(i) = &index {
            store.put_bytes(i)?;
        }
        let stored = store.put_bytes(&mbytes)?;
        debug_assert_eq!(stored, resolved.manifest);
        store.set_ref(&resolved.reference, &resolved.manifest, mbytes.len() as u64)?;
        Ok(Pulled {
            resolved,
            fetched_blobs: missing.len(),
            fetched_bytes: total,
            present_blobs: present,
        })
    }

    /// One blob into the store through a staging file, refused (and the file removed) unless
    /// it has the digest and size asked for.
    async fn fetch_blob(
        &self,
        e: &Endpoint,
        digest: &Digest,
        size: u64,
        media_type: &str,
        store: &Store,
        progress: &dyn Progress,
    ) -> Result<()> {
        let what = format!("blob {digest} of {}", e.reference.repository());
        let desc = OciDescriptor {
            media_type: media_type.to_string(),
            digest: digest.to_string(),
            size: size as i64,
            ..Default::default()
        };
        // Our own check below names both digests; the client's would only say "mismatch".
        let mut stream = e
            .client
            .pull_blob_stream(&e.reference, &desc)
            .await
            .map_err(|x| classify(x, &self.target(e, what.clone())))?
            .stream;
        let (tmp, file) = store.staging_file()?;
        let mut w = HashingWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
        let discard = |err: RegistryError| {
            let _ = std::fs::remove_file(&tmp);
            Err(err)
        };
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                // The client checks the digest itself and fails the stream's end on a
                // mismatch: with every byte here, our own check below names both digests.
                Err(_) if w.count() == size => break,
                Err(x) => {
                    let got = w.count();
                    return discard(RegistryError::Unreachable {
                        registry: e.reference.resolve_registry().to_string(),
                        message: format!(
                            "{what}: transfer broke off after {got} of {size} bytes: {}",
                            chain(&x)
                        ),
                    });
                }
            };
            if w.count() + chunk.len() as u64 > size {
                return discard(RegistryError::SizeMismatch {
                    what,
                    expected: size,
                    found: w.count() + chunk.len() as u64,
                });
            }
            if let Err(x) = w.write_all(&chunk) {
                return discard(RegistryError::Store(arena_image::ImageError::io(&tmp, x)));
            }
            progress.advance(chunk.len() as u64);
        }
        let (bw, found, n) = w.into_parts();
        if let Err(x) = bw
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| f.sync_all())
        {
            return discard(RegistryError::Store(arena_image::ImageError::io(&tmp, x)));
        }
        if n != size {
            return discard(RegistryError::SizeMismatch {
                what,
                expected: size,
                found: n,
            });
        }
        if &found != digest {
            return discard(RegistryError::DigestMismatch {
                what,
                expected: digest.to_string(),
                found: found.to_string(),
            });
        }
        store.commit_staged(&tmp, digest)?;
        Ok(())
    }
}
