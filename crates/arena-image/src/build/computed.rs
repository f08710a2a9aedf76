//! Layers computed while the image is built, rather than collected from inputs on the host:
//! bytecode compiled by the image's own interpreter from the layers below (layer/bytecode),
//! and the outputs of a build command run in a builder image's root (layer/build_step).

use std::path::{Path, PathBuf};

use super::{build, BuildContext, ImageSpec};
use crate::error::{ImageError, Result};
use crate::layer::sources::{add_directory, Owner};
use crate::layer::LayerTree;
use crate::recipe::{LayerSpec, LoadedRecipe};
use crate::record::LayerRecord;

/// A build layer's builder: a recipe of its own whose layers are all collected, so that no
/// builder waits on another.
pub(super) fn builder_spec(file: &Path) -> Result<ImageSpec> {
    let loaded = LoadedRecipe::load(file)?;
    if loaded
        .recipe
        .layers
        .iter()
        .any(|l| matches!(l, LayerSpec::Build { .. }))
    {
        return Err(ImageError::Recipe {
            file: file.to_path_buf(),
            field: "layer".into(),
            message: "a builder's own layers cannot be built by a command".into(),
        });
    }
    ImageSpec::from_recipe(&loaded)
}

fn scratch(ctx: &BuildContext, prefix: &str) -> Result<tempfile::TempDir> {
    let tmp = ctx.store.root().join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| ImageError::io(&tmp, e))?;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&tmp)
        .map_err(|e| ImageError::io(&tmp, e))
}

/// The bytecode layer of image `name` over `below` (its layers so far).
pub(super) fn bytecode(
    ctx: &BuildContext,
    name: &str,
    below: &[LayerRecord],
    interpreter: &str,
    paths: &[String],
) -> Result<LayerTree> {
    ctx.progress
        .phase(&format!("compiling bytecode of {name}"), None);
    let scratch = scratch(ctx, "bytecode-")?;
    crate::layer::unpack::unpack_layers(ctx.store, below, scratch.path())?;
    let tree = crate::layer::bytecode::compile(scratch.path(), interpreter, paths);
    ctx.progress.finish_phase();
    let (mut tree, uncompiled) = tree?;
    if !uncompiled.is_empty() {
        let shown: Vec<&str> = uncompiled.iter().take(3).map(|s| s.as_str()).collect();
        let more = uncompiled.len().saturating_sub(shown.len());
        let msg = format!(
            "{name}: {} file(s) do not compile and get no bytecode: {}{}",
            uncompiled.len(),
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
        tracing::warn!("{msg}");
        ctx.progress.note(&msg);
    }
    tree.add_parents();
    Ok(tree)
}

/// The build layer of image `name`: `builder` is built (or found unchanged in the store), its
/// layers unpacked into a scratch root, `command` run there, and the files under `outputs`
/// taken. Returns the tree and the scratch root it names files in, which must outlive the
/// layer's writing. The command's log is left in the store's tmp directory.
pub(super) fn build_output(
    ctx: &BuildContext,
    name: &str,
    builder: &ImageSpec,
    sources: &Path,
    command: &[String],
    outputs: &[String],
    mtime: u64,
) -> Result<(LayerTree, tempfile::TempDir)> {
    let (builder_rec, _) = build(ctx, builder)?;
    ctx.progress.phase(
        &format!("building a layer of {name} in {}", builder.name),
        None,
    );
    let root = scratch(ctx, "build-")?;
    let ran = crate::layer::unpack::unpack_layers(ctx.store, &builder_rec.layers, root.path())
        .and_then(|_| {
            let log = log_path(ctx, name);
            crate::layer::build_step::run(root.path(), sources, command, mtime, &log)
        });
    ctx.progress.finish_phase();
    ran?;
    let mut tree = LayerTree::new();
    for out in outputs {
        let dir = root.path().join(out.trim_start_matches('/'));
        if !dir.is_dir() {
            return Err(ImageError::invalid(
                format!("build layer of {name}"),
                format!("the command made no directory {out} (an output the recipe names)"),
            ));
        }
        let owner = Owner { uid: 0, gid: 0 };
        add_directory(&mut tree, &dir, out, owner, &format!("build output {out}"))?;
    }
    tree.add_parents();
    Ok((tree, root))
}

/// Where a build command's output is written: one file per image, replaced by the next build.
fn log_path(ctx: &BuildContext, name: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    ctx.store
        .root()
        .join("tmp")
        .join(format!("build-{safe}.log"))
}
