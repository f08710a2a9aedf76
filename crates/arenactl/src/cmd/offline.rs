//! `arenactl offline pack|install|verify`.

use std::path::{Path, PathBuf};

use arena_image::Store;
use arena_offline::PackInputs;

use super::{print_json, Outcome};
use crate::cli::OfflineCommand;
use crate::progress::Bars;

pub fn run(cmd: OfflineCommand) -> anyhow::Result<Outcome> {
    match cmd {
        OfflineCommand::Pack {
            image_locks,
            host_lock,
            agents,
            hidden,
            root,
            output,
            store,
            out,
        } => {
            let bars = Bars::new(out.json);
            let inputs = PackInputs {
                root,
                locks: image_locks,
                host_lock,
                agents,
                hidden,
                arenactl: std::env::current_exe()?,
            };
            let packed = arena_offline::pack(&store.store()?, &inputs, &output, &bars)?;
            if out.json {
                print_json(&serde_json::json!({
                    "kit": output,
                    "digest": packed.digest,
                    "bytes": packed.bytes,
                    "files": packed.manifest.files.len(),
                    "sets": packed.manifest.locks.iter().map(|l| &l.set).collect::<Vec<_>>(),
                }))?;
            } else {
                println!("{}  {}", packed.digest, output.display());
                eprintln!(
                    "{} files, {} bytes; on the offline node: tar -xf {kit} arena-offline/bin/arenactl && \
                     arena-offline/bin/arenactl offline install {kit} --prefix /opt/arena --expect {}",
                    packed.manifest.files.len(),
                    packed.bytes,
                    packed.digest,
                    kit = output.display(),
                );
            }
            Ok(Outcome::Ok)
        }
        OfflineCommand::Install {
            kit,
            prefix,
            expect,
            store,
            out,
        } => {
            let bars = Bars::new(out.json);
            let done =
                arena_offline::install(&kit, &prefix, store.as_deref(), expect.as_deref(), &bars)?;
            if out.json {
                print_json(&serde_json::to_value(&done)?)?;
            } else {
                println!("{}  {}", done.digest, done.prefix.display());
                eprintln!(
                    "{} files verified, {} images ({} new blobs) in {}; next: . {}/env.sh",
                    done.files,
                    done.images,
                    done.new_blobs,
                    done.store.display(),
                    done.prefix.display()
                );
                for l in &done.locks {
                    eprintln!("  lockfile {}", l.display());
                }
            }
            Ok(Outcome::Ok)
        }
        OfflineCommand::Verify { prefix, store, out } => {
            let store = match store {
                Some(s) => s,
                None => installed_store(&prefix)?,
            };
            let digest = arena_offline::verify_installed(&Store::open(&store)?, &prefix)?;
            if out.json {
                print_json(
                    &serde_json::json!({"prefix": prefix, "digest": digest, "store": store}),
                )?;
            } else {
                println!(
                    "{digest}  {}: every file and image verified",
                    prefix.display()
                );
            }
            Ok(Outcome::Ok)
        }
    }
}

/// The store an install recorded in PREFIX/etc/arena.env.
fn installed_store(prefix: &Path) -> anyhow::Result<PathBuf> {
    let env = prefix.join("etc/arena.env");
    let text = std::fs::read_to_string(&env)
        .map_err(|e| anyhow::anyhow!("{}: {e} (not an installed prefix?)", env.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("ARENA_STORE="))
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("{}: no ARENA_STORE line", env.display()))
}
