//! `arenactl image resolve|pull|push`, and the pull of a recipe's registry base that
//! `image build` and `lock` do when the store lacks it.

use std::path::Path;

use anyhow::Context;
use arena_image::recipe::BaseSpec;
use arena_image::{BasePin, Digest, LoadedRecipe, Progress, Store};
use arena_registry::{Registry, RegistryConfig};

use super::{print_json, runtime, Outcome};
use crate::cli::{RegistryArgs, StoreArgs};
use crate::progress::Bars;

impl RegistryArgs {
    pub fn registry(&self) -> anyhow::Result<Registry> {
        let (os, arch) = self.platform.split_once('/').with_context(|| {
            format!(
                "--platform {}: expected OS/ARCH (linux/amd64)",
                self.platform
            )
        })?;
        let mut mirrors = std::collections::BTreeMap::new();
        for m in &self.mirrors {
            let (from, to) = m
                .split_once('=')
                .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                .with_context(|| format!("--registry-mirror {m}: expected REGISTRY=MIRROR"))?;
            mirrors.insert(from.to_string(), to.to_string());
        }
        Ok(Registry::new(RegistryConfig {
            insecure: self.insecure.clone(),
            mirrors,
            auth_file: self.auth_file.clone(),
            os: Some(os.to_string()),
            architecture: Some(arch.to_string()),
        })?)
    }
}

/// Pulls the recipe's registry base into the store where its pinned manifest is missing
/// (a pinned digest makes this a fixed-output fetch: what arrives is checked against it).
pub fn ensure_base(
    loaded: &LoadedRecipe,
    store: &Store,
    registry: &RegistryArgs,
    progress: &dyn Progress,
) -> anyhow::Result<()> {
    let BaseSpec::Registry { reference } = &loaded.recipe.base else {
        return Ok(());
    };
    let Some(pinned) = reference
        .rsplit_once('@')
        .and_then(|(_, d)| Digest::parse(d).ok())
    else {
        // A tag: only a lock pins it (the build refuses it, saying so); nothing is fetched.
        return Ok(());
    };
    if store.has_blob(&pinned) {
        return Ok(());
    }
    let reg = registry.registry()?;
    let pulled = runtime()?
        .block_on(reg.pull(reference, store, progress))
        .with_context(|| format!("{}: base.reference", loaded.file.display()))?;
    progress.note(&format!("pulled base {}", pulled.resolved.reference));
    Ok(())
}

/// Before a lock: pins the base recipe's registry tag (the pin in `kept`, else the digest the
/// registry resolves the tag to now) and pulls the base where the store lacks it. Returns the
/// pins for the lock.
pub fn ensure_set_base(
    sets: &Path,
    set: &str,
    kept: &[BasePin],
    store: &Store,
    registry: &RegistryArgs,
    progress: &dyn Progress,
) -> anyhow::Result<Vec<BasePin>> {
    let (_, recipe) = arena_image::set_recipe(sets, set)?;
    let Some(tag) = recipe.base_tag() else {
        ensure_base(&recipe, store, registry, progress)?;
        return Ok(Vec::new());
    };
    let pin = match kept.iter().find(|p| p.reference == tag) {
        Some(p) => p.clone(),
        None => {
            let reg = registry.registry()?;
            let r = runtime()?
                .block_on(reg.resolve(tag))
                .with_context(|| format!("{}: base.reference", recipe.file.display()))?;
            progress.note(&format!("pinned {tag} to {}", r.reference));
            BasePin {
                reference: tag.to_string(),
                pinned: r.reference,
            }
        }
    };
    ensure_base(
        &recipe.with_base_pin(&pin.pinned)?,
        store,
        registry,
        progress,
    )?;
    Ok(vec![pin])
}

pub fn resolve(reference: &str, registry: &RegistryArgs, json: bool) -> anyhow::Result<Outcome> {
    let reg = registry.registry()?;
    let r = runtime()?.block_on(reg.resolve(reference))?;
    if json {
        print_json(&r)?;
    } else {
        println!("{}", r.reference);
    }
    Ok(Outcome::Ok)
}

pub fn pull(
    reference: &str,
    store: &StoreArgs,
    registry: &RegistryArgs,
    json: bool,
) -> anyhow::Result<Outcome> {
    let s = store.store()?;
    let reg = registry.registry()?;
    let bars = Bars::new(json);
    let p = runtime()?.block_on(reg.pull(reference, &s, &bars))?;
    if json {
        print_json(&p)?;
    } else {
        println!("{}", p.resolved.reference);
        eprintln!(
            "{} blobs fetched ({} bytes), {} already in {}",
            p.fetched_blobs,
            p.fetched_bytes,
            p.present_blobs,
            s.root().display()
        );
    }
    Ok(Outcome::Ok)
}

pub fn push(
    image: &str,
    reference: &str,
    store: &StoreArgs,
    registry: &RegistryArgs,
    json: bool,
) -> anyhow::Result<Outcome> {
    let s = store.store()?;
    let manifest = match Digest::parse(image) {
        Ok(d) => d,
        Err(_) => {
            let e = s.resolve_ref(image)?.with_context(|| {
                format!(
                    "{image}: neither a manifest digest nor an image name in {}",
                    s.root().display()
                )
            })?;
            e.digest
        }
    };
    let reg = registry.registry()?;
    let bars = Bars::new(json);
    let p = runtime()?.block_on(reg.push(&s, &manifest, reference, &bars))?;
    if json {
        print_json(&p)?;
    } else {
        println!("{}", p.reference);
        eprintln!(
            "{} blobs pushed ({} bytes), {} already there",
            p.pushed_blobs, p.pushed_bytes, p.present_blobs
        );
    }
    Ok(Outcome::Ok)
}
