//! Importing a locked image from arena's store into containerd: blobs into the content store
//! (skipping those already there; containerd verifies each against its digest), the layers
//! unpacked into the snapshotter by chain id, the image record pointing at the manifest, and
//! the garbage-collection labels that keep it all alive without a lease.

use std::collections::HashMap;
use std::io::Read;
use std::time::Duration;

use arena_image::{Digest, ImageRecord, Store};
use containerd_client::services::v1::content_client::ContentClient;
use containerd_client::services::v1::diff_client::DiffClient;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::{
    CommitSnapshotRequest, PrepareSnapshotRequest, StatSnapshotRequest,
};
use containerd_client::services::v1::{
    ApplyRequest, CreateImageRequest, GetImageRequest, Image, Info, InfoRequest,
    UpdateImageRequest, UpdateRequest, WriteAction, WriteContentRequest,
};
use containerd_client::types::Descriptor;
use tokio_stream::StreamExt;

use super::{lease, Containerd};
use crate::boundary::{IMPORT_LEASE_PREFIX, MANAGED_LABEL};
use crate::chain::chain_ids;
use crate::error::{call, Result, RuntimeError};
use crate::ImageRef;

const CHUNK: usize = 1 << 20;

async fn has_content(c: &Containerd, d: &Digest) -> Result<bool> {
    let mut cc = ContentClient::new(c.channel());
    match cc
        .info(c.req(
            InfoRequest {
                digest: d.to_string(),
            },
            None,
        ))
        .await
    {
        Ok(_) => Ok(true),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(false),
        Err(s) => Err(RuntimeError::Containerd {
            call: "content.Info",
            what: d.to_string(),
            status: Box::new(s),
        }),
    }
}

/// Streams one blob of the store into containerd's content store.
/// `<pid>-<n>`: names of ingest refs, extraction snapshots and import leases that no other
/// import (in this process or another) uses at the same time.
fn import_tag() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

async fn write_blob(
    c: &Containerd,
    store: &Store,
    d: &Digest,
    size: u64,
    lease: &str,
) -> Result<()> {
    let path = store.blob_path(d);
    let (tx, rx) = tokio::sync::mpsc::channel::<WriteContentRequest>(4);
    let reference = format!("arena-{}-{}", d.hex(), import_tag());
    let (r2, d2, p2) = (reference.clone(), d.to_string(), path.clone());
    let reader = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        let mut f = std::fs::File::open(&p2)?;
        let mut offset = 0i64;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            let msg = WriteContentRequest {
                action: WriteAction::Write as i32,
                r#ref: r2.clone(),
                total: size as i64,
                expected: d2.clone(),
                offset,
                data: buf[..n].to_vec(),
                labels: HashMap::new(),
            };
            offset += n as i64;
            if tx.blocking_send(msg).is_err() {
                return Ok(());
            }
        }
        let _ = tx.blocking_send(WriteContentRequest {
            action: WriteAction::Commit as i32,
            r#ref: r2,
            total: size as i64,
            expected: d2,
            offset,
            data: Vec::new(),
            labels: HashMap::new(),
        });
        Ok(())
    });
    let mut cc = ContentClient::new(c.channel());
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    // The write's outcome, from the call or from any response; the stream is dropped with the
    // block, so the reader stops sending on an early end.
    let written: std::result::Result<(), tonic::Status> = async {
        let mut responses = cc.write(c.req(stream, Some(lease))).await?.into_inner();
        while let Some(r) = responses.next().await {
            r?;
        }
        Ok(())
    }
    .await;
    match written {
        Ok(()) => {}
        // Another import (a second task run, or a job on this node) committed the same blob
        // first: content is content-addressed, so it is ours too, under our lease.
        Err(s) if s.code() == tonic::Code::AlreadyExists => {
            let _ = reader.await;
            return lease::add_resource(c, lease, d.as_str(), "content").await;
        }
        Err(s) => {
            return Err(RuntimeError::Containerd {
                call: "content.Write",
                what: d.to_string(),
                status: Box::new(s),
            })
        }
    }
    reader
        .await
        .map_err(|e| RuntimeError::invalid(d.to_string(), e.to_string()))?
        .map_err(|e| RuntimeError::io(&path, e))?;
    Ok(())
}

/// Sets labels on a blob (the garbage collector follows `containerd.io/gc.ref.*`).
async fn label_content(c: &Containerd, d: &Digest, labels: HashMap<String, String>) -> Result<()> {
    let paths = labels.keys().map(|k| format!("labels.{k}")).collect();
    let mut cc = ContentClient::new(c.channel());
    call(
        cc.update(c.req(
            UpdateRequest {
                info: Some(Info {
                    digest: d.to_string(),
                    labels,
                    ..Default::default()
                }),
                update_mask: Some(prost_types::FieldMask { paths }),
            },
            None,
        ))
        .await,
        "content.Update",
        d.to_string(),
    )
    .map(|_| ())
}

async fn snapshot_exists(c: &Containerd, key: &str) -> Result<bool> {
    let mut sc = SnapshotsClient::new(c.channel());
    match sc
        .stat(c.req(
            StatSnapshotRequest {
                snapshotter: c.snapshotter.clone(),
                key: key.to_string(),
            },
            None,
        ))
        .await
    {
        Ok(_) => Ok(true),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(false),
        Err(s) => Err(RuntimeError::Containerd {
            call: "snapshots.Stat",
            what: key.to_string(),
            status: Box::new(s),
        }),
    }
}

/// Unpacks the layers that are not yet unpacked, each on its parent, named by chain id.
async fn unpack(c: &Containerd, rec: &ImageRecord, lease: &str) -> Result<()> {
    let diff_ids: Vec<Digest> = rec.layers.iter().map(|l| l.diff_id.clone()).collect();
    let chains = chain_ids(&diff_ids);
    let mut sc = SnapshotsClient::new(c.channel());
    let mut dc = DiffClient::new(c.channel());
    for (i, (layer, chain)) in rec.layers.iter().zip(&chains).enumerate() {
        if snapshot_exists(c, chain.as_str()).await? {
            continue;
        }
        let parent = if i == 0 {
            String::new()
        } else {
            chains[i - 1].to_string()
        };
        let key = format!("extract-{}-{}", import_tag(), chain.hex());
        let prepared = call(
            sc.prepare(c.req(
                PrepareSnapshotRequest {
                    snapshotter: c.snapshotter.clone(),
                    key: key.clone(),
                    parent,
                    labels: HashMap::new(),
                },
                Some(lease),
            ))
            .await,
            "snapshots.Prepare",
            &key,
        )?;
        let applied = dc
            .apply(c.req(
                ApplyRequest {
                    diff: Some(Descriptor {
                        media_type: layer.media_type.clone(),
                        digest: layer.digest.to_string(),
                        size: layer.size as i64,
                        annotations: HashMap::new(),
                    }),
                    mounts: prepared.mounts,
                    payloads: HashMap::new(),
                    sync_fs: false,
                },
                Some(lease),
            ))
            .await;
        let applied = match call(applied, "diff.Apply", layer.digest.to_string()) {
            Ok(a) => a,
            Err(e) => {
                let _ = super::delete::remove_snapshot(c, &key).await;
                return Err(e);
            }
        };
        let got = applied.applied.map(|d| d.digest).unwrap_or_default();
        if got != layer.diff_id.as_str() {
            return Err(RuntimeError::invalid(
                format!("layer {} of {}", layer.digest, rec.name),
                format!(
                    "unpacked to diff {got}, the lockfile says {}",
                    layer.diff_id
                ),
            ));
        }
        match sc
            .commit(c.req(
                CommitSnapshotRequest {
                    snapshotter: c.snapshotter.clone(),
                    name: chain.to_string(),
                    key: key.clone(),
                    labels: HashMap::new(),
                },
                Some(lease),
            ))
            .await
        {
            Ok(_) => {}
            // Another import unpacked the same layer first: use its snapshot (the same chain
            // id is the same content) and drop ours.
            Err(s) if s.code() == tonic::Code::AlreadyExists => {
                let _ = super::delete::remove_snapshot(c, &key).await;
                lease::add_resource(
                    c,
                    lease,
                    chain.as_str(),
                    &format!("snapshots/{}", c.snapshotter),
                )
                .await?;
            }
            Err(s) => {
                return Err(RuntimeError::Containerd {
                    call: "snapshots.Commit",
                    what: chain.to_string(),
                    status: Box::new(s),
                })
            }
        }
    }
    Ok(())
}

/// The manifest digest containerd holds under `name`, if any.
pub async fn image_digest(c: &Containerd, name: &str) -> Result<Option<Digest>> {
    let mut ic = ImagesClient::new(c.channel());
    match ic
        .get(c.req(
            GetImageRequest {
                name: name.to_string(),
            },
            None,
        ))
        .await
    {
        Ok(r) => {
            let d = r
                .into_inner()
                .image
                .and_then(|i| i.target)
                .map(|t| t.digest)
                .unwrap_or_default();
            Ok(Some(
                Digest::parse(&d).map_err(arena_image::ImageError::from)?,
            ))
        }
        Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
        Err(s) => Err(RuntimeError::Containerd {
            call: "images.Get",
            what: name.to_string(),
            status: Box::new(s),
        }),
    }
}

/// Checks that containerd holds exactly the locked manifest under the image's name.
pub async fn verify_image(c: &Containerd, rec: &ImageRecord) -> Result<ImageRef> {
    match image_digest(c, &rec.name).await? {
        Some(d) if d == rec.manifest => ImageRef::from_record(rec),
        Some(d) => Err(RuntimeError::ImageMismatch {
            name: rec.name.clone(),
            expected: rec.manifest.to_string(),
            found: d.to_string(),
        }),
        None => Err(RuntimeError::invalid(
            format!("image {}", rec.name),
            "not in containerd (import it first)",
        )),
    }
}

/// Makes containerd hold the locked image: imports what is missing, and refuses an image of
/// the same name with another manifest (naming both digests) instead of replacing it.
pub async fn ensure_image(c: &Containerd, store: &Store, rec: &ImageRecord) -> Result<ImageRef> {
    // An image that cannot be run is refused before anything is imported.
    ImageRef::from_record(rec)?;
    if let Some(d) = image_digest(c, &rec.name).await? {
        if d != rec.manifest {
            return Err(RuntimeError::ImageMismatch {
                name: rec.name.clone(),
                expected: rec.manifest.to_string(),
                found: d.to_string(),
            });
        }
    }
    // Unique per call: two task runs of one runner (or two jobs on one node) may import
    // the same image at once.
    let lease_id = format!(
        "{}{}-{}",
        IMPORT_LEASE_PREFIX,
        import_tag(),
        rec.manifest.short()
    );
    let lease = lease::create(c, &lease_id, Duration::from_secs(3600), &HashMap::new()).await?;
    let result = import_under(c, store, rec, &lease).await;
    let _ = lease::delete(c, &lease).await;
    result
}

async fn import_under(
    c: &Containerd,
    store: &Store,
    rec: &ImageRecord,
    lease: &str,
) -> Result<ImageRef> {
    let mut blobs = vec![(rec.config.clone(), rec.config_size)];
    blobs.extend(rec.layers.iter().map(|l| (l.digest.clone(), l.size)));
    blobs.push((rec.manifest.clone(), rec.manifest_size));
    for (d, size) in &blobs {
        if !has_content(c, d).await? {
            // Hashing a blob reads it whole: blocking work, off the async workers.
            let (st, d2, sz) = (store.clone(), d.clone(), *size);
            tokio::task::spawn_blocking(move || st.verify_blob(&d2, Some(sz)))
                .await
                .map_err(|e| RuntimeError::invalid(d.to_string(), e.to_string()))??;
            write_blob(c, store, d, *size, lease).await?;
        }
    }
    unpack(c, rec, lease).await?;
    let top = ImageRef::from_record(rec)?.top_chain_id;
    // What the garbage collector must keep while the image record exists.
    let mut manifest_labels = HashMap::new();
    manifest_labels.insert(
        "containerd.io/gc.ref.content.config".to_string(),
        rec.config.to_string(),
    );
    for (i, l) in rec.layers.iter().enumerate() {
        manifest_labels.insert(
            format!("containerd.io/gc.ref.content.l.{i}"),
            l.digest.to_string(),
        );
    }
    label_content(c, &rec.manifest, manifest_labels).await?;
    let mut config_labels = HashMap::new();
    config_labels.insert(
        format!("containerd.io/gc.ref.snapshot.{}", c.snapshotter),
        top.to_string(),
    );
    label_content(c, &rec.config, config_labels).await?;

    let mut labels = HashMap::new();
    labels.insert(MANAGED_LABEL.to_string(), "true".to_string());
    let image = Image {
        name: rec.name.clone(),
        labels,
        target: Some(Descriptor {
            media_type: arena_image::store::MEDIA_TYPE_MANIFEST.to_string(),
            digest: rec.manifest.to_string(),
            size: rec.manifest_size as i64,
            annotations: HashMap::new(),
        }),
        ..Default::default()
    };
    let mut ic = ImagesClient::new(c.channel());
    match ic
        .create(c.req(
            CreateImageRequest {
                image: Some(image.clone()),
                ..Default::default()
            },
            Some(lease),
        ))
        .await
    {
        Ok(_) => {}
        Err(s) if s.code() == tonic::Code::AlreadyExists => {
            call(
                ic.update(c.req(
                    UpdateImageRequest {
                        image: Some(image),
                        ..Default::default()
                    },
                    Some(lease),
                ))
                .await,
                "images.Update",
                &rec.name,
            )?;
        }
        Err(s) => {
            return Err(RuntimeError::Containerd {
                call: "images.Create",
                what: rec.name.clone(),
                status: Box::new(s),
            })
        }
    }
    verify_image(c, rec).await
}
