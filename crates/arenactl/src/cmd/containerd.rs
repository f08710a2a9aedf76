//! `arenactl image load` and `arenactl gc`: arena's images and leftovers in containerd.

use std::path::Path;

use arena_image::{Lockfile, Store};
use arena_runtime::{ContainerRuntime, Containerd};

use super::{print_json, runtime, Outcome};
use crate::cli::ContainerdArgs;

pub async fn connect(args: &ContainerdArgs) -> anyhow::Result<Containerd> {
    Containerd::connect(&args.socket, &args.namespace)
        .await
        .map_err(|e| super::reach::containerd_error(&args.socket, e))
}

pub fn load(
    lockfile: &Path,
    store: &Store,
    args: &ContainerdArgs,
    json: bool,
) -> anyhow::Result<Outcome> {
    let lock = Lockfile::load(lockfile)?;
    let loaded = runtime()?.block_on(async {
        let c = connect(args).await?;
        let mut loaded = Vec::new();
        for rec in &lock.images {
            let who = rec.task.clone().unwrap_or_else(|| rec.name.clone());
            let image = c
                .ensure_image(store, rec)
                .await
                .map_err(|e| anyhow::anyhow!("{who}: {e}"))?;
            if !json {
                println!("{}  {}", image.manifest, image.name);
            }
            loaded.push(serde_json::json!({"name": image.name, "task": rec.task, "manifest": image.manifest}));
        }
        anyhow::Ok(loaded)
    })?;
    if json {
        print_json(&serde_json::json!({"namespace": args.namespace, "images": loaded}))?;
    }
    Ok(Outcome::Ok)
}

/// `arenactl gc [--all]`: what crashed processes left (owner gone, or past its deadline);
/// with `--all`, everything arena holds in the namespace, live runs included.
pub fn gc(args: &ContainerdArgs, all: bool, json: bool) -> anyhow::Result<Outcome> {
    let removed = runtime()?.block_on(async {
        let c = connect(args).await?;
        anyhow::Ok(arena_runtime::cleanup::gc(&c, all).await?)
    })?;
    if json {
        print_json(&removed)?;
    } else {
        println!(
            "removed {} containers, {} snapshots, {} leases from namespace {}",
            removed.containers.len(),
            removed.snapshots.len(),
            removed.leases.len(),
            args.namespace
        );
    }
    Ok(Outcome::Ok)
}
