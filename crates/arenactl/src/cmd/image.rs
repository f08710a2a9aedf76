//! `arenactl image build|load|verify|lock` (also `arenactl lock`); registry commands in
//! registry.rs, `ls` and `prune` in image_store.rs.

use anyhow::Context as _;
use std::path::PathBuf;

use arena_image::{build, BuildContext, ImageSpec, LoadedRecipe, Store};

use super::{print_json, Outcome};
use crate::cli::{ImageCommand, LockArgs, StoreArgs};
use crate::progress::Bars;

impl StoreArgs {
    pub fn store(&self) -> anyhow::Result<Store> {
        let root = crate::config::store_root(&self.store)?;
        Ok(Store::open(&root)?)
    }

    pub fn deb_dir(&self) -> Option<PathBuf> {
        self.deb_dir
            .clone()
            .or_else(|| std::env::var_os("ARENA_DEB_DIR").map(PathBuf::from))
            .or_else(|| Some(Store::default_root().with_file_name("debs")))
    }

    pub fn wheel_dir(&self) -> Option<PathBuf> {
        self.wheel_dir
            .clone()
            .or_else(|| std::env::var_os("ARENA_WHEEL_DIR").map(PathBuf::from))
            .or_else(|| Some(Store::default_root().with_file_name("wheels")))
    }
}

pub fn run(cmd: ImageCommand) -> anyhow::Result<Outcome> {
    match cmd {
        ImageCommand::Build {
            recipe,
            store,
            registry,
            out,
        } => {
            let bars = Bars::new(out.json);
            let s = store.store()?;
            let loaded = LoadedRecipe::load(&recipe)?;
            super::registry::ensure_base(&loaded, &s, &registry, &bars)?;
            let ctx =
                BuildContext::new(&s, store.deb_dir(), &bars).with_wheel_dir(store.wheel_dir());
            let spec = ImageSpec::from_recipe(&loaded)?;
            let (rec, built) = build(&ctx, &spec)?;
            if out.json {
                print_json(&serde_json::json!({"built": built, "image": rec}))?;
            } else {
                println!("{}  {}", rec.manifest, rec.name);
            }
            Ok(Outcome::Ok)
        }
        ImageCommand::Load {
            image_lock,
            store,
            containerd,
            out,
        } => super::containerd::load(&image_lock, &store.store()?, &containerd, out.json),
        ImageCommand::Verify {
            image_lock,
            store,
            out,
        } => {
            let bars = Bars::new(out.json);
            let s = store.store()?;
            let ctx =
                BuildContext::new(&s, store.deb_dir(), &bars).with_wheel_dir(store.wheel_dir());
            let mismatches = arena_image::verify(&ctx, &image_lock)?;
            if out.json {
                print_json(&serde_json::json!({
                    "lockfile": image_lock,
                    "ok": mismatches.is_empty(),
                    "mismatches": mismatches,
                }))?;
            } else if mismatches.is_empty() {
                println!("{}: every digest matches", image_lock.display());
            } else {
                for m in &mismatches {
                    eprintln!("mismatch: {m}");
                }
                eprintln!(
                    "{}: {} mismatch(es)",
                    image_lock.display(),
                    mismatches.len()
                );
            }
            Ok(if mismatches.is_empty() {
                Outcome::Ok
            } else {
                Outcome::Invalid
            })
        }
        ImageCommand::Lock(args) => lock(args),
        ImageCommand::Ls {
            image_locks,
            store,
            out,
        } => super::image_store::ls(&store.store()?, &image_locks, out.json),
        ImageCommand::Prune(args) => super::image_store::prune(&args),
        ImageCommand::Resolve {
            reference,
            registry,
            out,
        } => super::registry::resolve(&reference, &registry, out.json),
        ImageCommand::Pull {
            reference,
            store,
            registry,
            out,
        } => super::registry::pull(&reference, &store, &registry, out.json),
        ImageCommand::Push {
            image,
            reference,
            store,
            registry,
            out,
        } => super::registry::push(&image, &reference, &store, &registry, out.json),
    }
}

pub fn lock(args: LockArgs) -> anyhow::Result<Outcome> {
    let bars = Bars::new(args.json.json);
    let s = args.store.store()?;
    let ctx =
        BuildContext::new(&s, args.store.deb_dir(), &bars).with_wheel_dir(args.store.wheel_dir());
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from(format!("lockfiles/{}.lock", args.set)));
    let dir = out.parent().map(PathBuf::from).unwrap_or_default();
    // The pins of the lockfile being rewritten: a tag resolved on an earlier lock stays on the
    // digest it was resolved to.
    let kept = match (&args.update_pins, out.exists()) {
        (false, true) => {
            arena_image::Lockfile::load(&out)
                .map_err(anyhow::Error::from)
                .with_context(|| {
                    format!(
                        "{}: its pins are kept (--update-pins resolves them again)",
                        out.display()
                    )
                })?
                .pins
        }
        _ => Vec::new(),
    };
    let pins =
        super::registry::ensure_set_base(&args.sets, &args.set, &kept, &s, &args.registry, &bars)?;
    let lock = arena_image::lock_set(&ctx, &args.sets, &args.set, &dir, &pins)?;
    lock.write(&out)?;
    if args.json.json {
        print_json(&serde_json::json!({"lockfile": out, "lock": lock}))?;
    } else {
        for i in &lock.images {
            println!("{}  {}", i.manifest, i.task.as_deref().unwrap_or(&i.name));
        }
        eprintln!("wrote {}", out.display());
    }
    Ok(Outcome::Ok)
}
