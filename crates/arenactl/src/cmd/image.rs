//! `arenactl image build|verify`.

use std::path::PathBuf;

use arena_image::{build, BuildContext, ImageSpec, LoadedRecipe, Store};

use super::{print_json, Outcome};
use crate::cli::{ImageCommand, StoreArgs};
use crate::progress::Bars;

impl StoreArgs {
    pub fn store(&self) -> anyhow::Result<Store> {
        let root = self.store.clone().unwrap_or_else(Store::default_root);
        Ok(Store::open(&root)?)
    }

    pub fn deb_dir(&self) -> Option<PathBuf> {
        self.deb_dir
            .clone()
            .or_else(|| std::env::var_os("ARENA_DEB_DIR").map(PathBuf::from))
            .or_else(|| Some(Store::default_root().with_file_name("debs")))
    }
}

pub fn run(cmd: ImageCommand) -> anyhow::Result<Outcome> {
    match cmd {
        ImageCommand::Build { recipe, store, out } => {
            let bars = Bars::new(out.json);
            let s = store.store()?;
            let ctx = BuildContext::new(&s, store.deb_dir(), &bars);
            let loaded = LoadedRecipe::load(&recipe)?;
            let spec = ImageSpec::from_recipe(&loaded)?;
            let (rec, built) = build(&ctx, &spec)?;
            if out.json {
                print_json(&serde_json::json!({"built": built, "image": rec}))?;
            } else {
                println!("{}  {}", rec.manifest, rec.name);
            }
            Ok(Outcome::Ok)
        }
    }
}
