//! `arenactl image ls` and `arenactl image prune`: what the content-addressed store holds, and
//! removing what no lockfile reaches. A blob is reached from a lockfile's image records
//! (manifest, config, layers, base) and, through every manifest or index among them, from
//! what that JSON names, so a registry base pulled by a pin stays with its platforms.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::Context;
use arena_image::store::{write_index, REF_NAME};
use arena_image::{Digest, ImageRecord, Store};
use serde::Serialize;

use super::{print_json, Outcome};
use crate::cli::PruneArgs;

/// The blobs a manifest or index names (config, layers, manifests); none for other blobs.
fn children(store: &Store, d: &Digest) -> Vec<Digest> {
    let Ok(bytes) = std::fs::read(store.blob_path(d)) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Vec::new();
    };
    let digest_of = |e: &serde_json::Value| {
        e.get("digest")
            .and_then(|d| d.as_str())
            .and_then(|d| Digest::parse(d).ok())
    };
    let mut out: Vec<Digest> = v.get("config").and_then(digest_of).into_iter().collect();
    for list in ["layers", "manifests"] {
        if let Some(items) = v.get(list).and_then(|l| l.as_array()) {
            out.extend(items.iter().filter_map(digest_of));
        }
    }
    out
}

/// Every blob reachable from `roots`, following manifests and indexes.
fn reach(store: &Store, roots: impl IntoIterator<Item = Digest>) -> BTreeSet<Digest> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<Digest> = roots.into_iter().collect();
    while let Some(d) = todo.pop() {
        if seen.insert(d.clone()) {
            todo.extend(children(store, &d));
        }
    }
    seen
}

/// The roots of one lockfile: each image's manifest, config, layers and base, and its pins.
fn lock_roots(rec: &[ImageRecord], pins: &[arena_image::BasePin]) -> Vec<Digest> {
    let mut out = Vec::new();
    for r in rec {
        out.push(r.manifest.clone());
        out.push(r.config.clone());
        out.extend(r.layers.iter().map(|l| l.digest.clone()));
        out.extend(Digest::parse(&r.base).ok());
    }
    for p in pins {
        out.extend(
            p.pinned
                .rsplit_once('@')
                .and_then(|(_, d)| Digest::parse(d).ok()),
        );
    }
    out
}

/// The blobs of the store, by digest, with their sizes.
fn blobs(store: &Store) -> anyhow::Result<BTreeMap<Digest, u64>> {
    let dir = store.root().join("blobs/sha256");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e.with_context(|| format!("reading {}", dir.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        // Anything not named by a digest is not a blob of the store: left alone.
        if let Ok(d) = Digest::parse(&format!("sha256:{name}")) {
            let size = e.metadata().map(|m| m.len()).unwrap_or(0);
            out.insert(d, size);
        }
    }
    Ok(out)
}

#[derive(Serialize)]
struct Locked {
    lockfile: PathBuf,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<String>,
}

#[derive(Serialize)]
struct Listed {
    digest: Digest,
    /// Bytes of its manifest, config and layers (layers shared with other images counted in each).
    size: u64,
    /// The store's name for it (index.json), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// What the given lockfiles lock it as.
    locked: Vec<Locked>,
}

pub fn ls(store: &Store, locks: &[PathBuf], json: bool) -> anyhow::Result<Outcome> {
    let sizes = blobs(store)?;
    let mut images: BTreeMap<Digest, Listed> = BTreeMap::new();
    let mut named = Vec::new();
    for e in store.index_entries()? {
        named.push((e.digest.clone(), e.annotations.get(REF_NAME).cloned(), None));
    }
    for f in locks {
        let lock = super::preflight::lockfile("--image-lock", f)?;
        for r in &lock.images {
            let locked = Locked {
                lockfile: f.clone(),
                name: r.name.clone(),
                task: r.task.clone(),
            };
            named.push((r.manifest.clone(), None, Some(locked)));
        }
    }
    // Only what the store holds: a lockfile's image that is not here is not listed.
    for (d, name, locked) in named.into_iter().filter(|(d, ..)| sizes.contains_key(d)) {
        let l = images.entry(d.clone()).or_insert_with(|| Listed {
            size: reach(store, [d.clone()])
                .iter()
                .filter_map(|b| sizes.get(b))
                .sum(),
            digest: d,
            name: None,
            locked: Vec::new(),
        });
        if name.is_some() {
            l.name = name;
        }
        l.locked.extend(locked);
    }
    let total: u64 = sizes.values().sum();
    if json {
        print_json(&serde_json::json!({
            "store": store.root(),
            "blobs": sizes.len(),
            "bytes": total,
            "images": images.values().collect::<Vec<_>>(),
        }))?;
        return Ok(Outcome::Ok);
    }
    for l in images.values() {
        let locked: Vec<String> = l
            .locked
            .iter()
            .map(|k| {
                let what = k.task.as_deref().unwrap_or(&k.name);
                format!("{what} ({})", k.lockfile.display())
            })
            .collect();
        println!(
            "{}  {:>10}  {}{}",
            l.digest,
            bytesize::ByteSize(l.size).to_string(),
            l.name.as_deref().unwrap_or("-"),
            if locked.is_empty() {
                String::new()
            } else {
                format!("  locked as {}", locked.join(", "))
            }
        );
    }
    eprintln!(
        "{} images; {} blobs, {} in {}",
        images.len(),
        sizes.len(),
        bytesize::ByteSize(total),
        store.root().display()
    );
    Ok(Outcome::Ok)
}

#[derive(Serialize)]
struct Pruned {
    dry_run: bool,
    kept_blobs: usize,
    removed_blobs: Vec<Digest>,
    freed_bytes: u64,
    /// Names of the store's index that pointed at removed images.
    removed_names: Vec<String>,
    removed_build_records: usize,
}

pub fn prune(args: &PruneArgs) -> anyhow::Result<Outcome> {
    let mut roots = Vec::new();
    for f in &args.keep_locks {
        let lock = super::preflight::lockfile("--keep-lock", f)?;
        roots.extend(lock_roots(&lock.images, &lock.pins));
    }
    let store = args.store.store()?;
    let keep = reach(&store, roots);
    let all = blobs(&store)?;
    let gone: Vec<(&Digest, &u64)> = all.iter().filter(|(d, _)| !keep.contains(*d)).collect();
    let entries = store.index_entries()?;
    let (kept_entries, dropped): (Vec<_>, Vec<_>) =
        entries.into_iter().partition(|e| keep.contains(&e.digest));
    let records = stale_records(&store, &keep)?;
    if !args.dry_run {
        // Names and records first: a store interrupted half way never names a missing blob.
        if !dropped.is_empty() {
            write_index(&store.root().join("index.json"), &kept_entries)?;
        }
        for r in &records {
            std::fs::remove_file(r).with_context(|| format!("removing {}", r.display()))?;
        }
        for (d, _) in &gone {
            let p = store.blob_path(d);
            std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
        }
    }
    let out = Pruned {
        dry_run: args.dry_run,
        kept_blobs: all.len() - gone.len(),
        removed_blobs: gone.iter().map(|(d, _)| (*d).clone()).collect(),
        freed_bytes: gone.iter().map(|(_, s)| **s).sum(),
        removed_names: dropped
            .iter()
            .filter_map(|e| e.annotations.get(REF_NAME).cloned())
            .collect(),
        removed_build_records: records.len(),
    };
    if args.out.json {
        print_json(&out)?;
    } else {
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removed"
        };
        for d in &out.removed_blobs {
            println!("{d}");
        }
        for n in &out.removed_names {
            eprintln!("{verb} the name {n}");
        }
        eprintln!(
            "{verb} {} blobs ({}) and {} build records; kept {} blobs reachable from {} lockfile(s) in {}",
            out.removed_blobs.len(),
            bytesize::ByteSize(out.freed_bytes),
            out.removed_build_records,
            out.kept_blobs,
            args.keep_locks.len(),
            store.root().display()
        );
    }
    Ok(Outcome::Ok)
}

/// Build records (arena/derivations/*.json) whose image is not kept: a later build of the
/// same inputs must build again, not find a record whose blobs are gone.
fn stale_records(store: &Store, keep: &BTreeSet<Digest>) -> anyhow::Result<Vec<PathBuf>> {
    let dir = store.root().join("arena/derivations");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(out);
    };
    for e in entries {
        let p = e
            .with_context(|| format!("reading {}", dir.display()))?
            .path();
        let rec: Option<ImageRecord> = std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if rec.is_some_and(|r| !keep.contains(&r.manifest)) {
            out.push(p);
        }
    }
    Ok(out)
}
