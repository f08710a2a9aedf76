//! `arenactl bundle export|import`.

use arena_image::bundle;

use super::{print_json, Outcome};
use crate::cli::BundleCommand;
use crate::progress::Bars;

pub fn run(cmd: BundleCommand) -> anyhow::Result<Outcome> {
    match cmd {
        BundleCommand::Export {
            image_lock,
            output,
            store,
            out,
        } => {
            let bars = Bars::new(out.json);
            let s = store.store()?;
            let blobs = bundle::export(&s, &image_lock, &output, &bars)?;
            let size = std::fs::metadata(&output)?.len();
            if out.json {
                print_json(&serde_json::json!({"bundle": output, "blobs": blobs, "bytes": size}))?;
            } else {
                println!("{}: {blobs} blobs, {size} bytes", output.display());
            }
            Ok(Outcome::Ok)
        }
        BundleCommand::Import {
            bundle: file,
            lock_out,
            store,
            out,
        } => {
            let bars = Bars::new(out.json);
            let s = store.store()?;
            let imported = bundle::import(&s, &file, &bars)?;
            if let Some(p) = &lock_out {
                bundle::save_lock(&imported, p)?;
            }
            if out.json {
                print_json(&serde_json::json!({
                    "bundle": file,
                    "blobs": imported.blobs,
                    "new_blobs": imported.new_blobs,
                    "images": imported.lock.images,
                }))?;
            } else {
                for i in &imported.lock.images {
                    println!("{}  {}", i.manifest, i.name);
                }
                eprintln!(
                    "imported {} blobs ({} new) into {}",
                    imported.blobs,
                    imported.new_blobs,
                    s.root().display()
                );
            }
            Ok(Outcome::Ok)
        }
    }
}
