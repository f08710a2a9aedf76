//! The derivation of an image: a digest over every input of its build (base, each layer's
//! input digest, config, mtime, compression, platform, task), computed before anything is
//! built, so an unchanged recipe is found in the store instead of rebuilt.

use serde::Serialize;

use super::{collect, resolve_base, BuildContext, ImageSpec, ResolvedLayer, FORMAT};
use crate::base::BaseImage;
use crate::canonical::canonical_json;
use crate::compress::Compression;
use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::inputs::tree_digest;
use crate::recipe::{ConfigSpec, Platform};

#[derive(Serialize)]
struct DerivationInput<'a> {
    format: &'static str,
    name: &'a str,
    base: &'a str,
    layers: Vec<serde_json::Value>,
    config: &'a ConfigSpec,
    mtime: u64,
    compression: Compression,
    platform: &'a Platform,
    task: Option<&'a (String, String)>,
}

/// The input digest of a layer: archives by their own digest, host trees by their content.
fn layer_input(ctx: &BuildContext, layer: &ResolvedLayer) -> Result<serde_json::Value> {
    Ok(match layer {
        ResolvedLayer::Debs {
            merged_usr,
            packages,
        } => serde_json::json!({
            "kind": "debs", "merged_usr": merged_usr,
            "packages": packages.iter().map(|p| format!("{}={}:{}@sha256:{}", p.name, p.version, p.arch, p.sha256)).collect::<Vec<_>>(),
        }),
        // What it compiles is the layers below, which the derivation names already.
        ResolvedLayer::Bytecode { interpreter, paths } => serde_json::json!({
            "kind": "bytecode", "interpreter": interpreter, "paths": paths,
        }),
        // The builder by its own derivation (its inputs, not its bytes: a builder unchanged
        // is not rebuilt), the sources by their content.
        ResolvedLayer::Build {
            builder,
            sources,
            command,
            outputs,
        } => {
            let (builder_drv, _) = derivation(ctx, builder)?;
            let tree = collect(
                ctx,
                &ResolvedLayer::Directory {
                    path: sources.clone(),
                    target: "/src".into(),
                    owner: (0, 0),
                },
            )?;
            serde_json::json!({
                "kind": "build", "builder": builder_drv, "sources": tree_digest(&tree, &ctx.hashes)?,
                "command": command, "outputs": outputs,
            })
        }
        ResolvedLayer::Wheels {
            site_packages,
            prefix,
            interpreter,
            wheels,
        } => serde_json::json!({
            "kind": "wheels", "site_packages": site_packages, "prefix": prefix,
            "interpreter": interpreter,
            "wheels": wheels.iter().map(|w| format!("{}@sha256:{}", w.file, w.sha256)).collect::<Vec<_>>(),
        }),
        ResolvedLayer::Tarball {
            path,
            target,
            owner,
            sha256,
        } => {
            let (d, _) = Digest::of_file(path).map_err(|e| ImageError::io(path, e))?;
            if let Some(want) = sha256 {
                if d.hex() != want.as_str() {
                    return Err(ImageError::DigestMismatch {
                        what: format!("{} (the recipe's tarball sha256)", path.display()),
                        expected: format!("sha256:{want}"),
                        found: d.to_string(),
                    });
                }
            }
            serde_json::json!({"kind": "tarball", "target": target, "owner": [owner.0, owner.1], "input": d})
        }
        other => {
            let tree = collect(ctx, other)?;
            serde_json::json!({"kind": "tree", "input": tree_digest(&tree, &ctx.hashes)?})
        }
    })
}

/// The derivation hash of a spec (hashes host inputs; the base is resolved, and so imported).
pub fn derivation(ctx: &BuildContext, spec: &ImageSpec) -> Result<(Digest, BaseImage)> {
    let base = resolve_base(ctx, &spec.base)?;
    let mut layers = Vec::new();
    ctx.progress
        .phase(&format!("hashing inputs of {}", spec.name), None);
    for l in &spec.layers {
        layers.push(layer_input(ctx, l)?);
    }
    ctx.progress.finish_phase();
    let input = DerivationInput {
        format: FORMAT,
        name: &spec.name,
        base: &base.id,
        layers,
        config: &spec.config,
        mtime: spec.mtime,
        compression: spec.compression,
        platform: &spec.platform,
        task: spec.task.as_ref(),
    };
    Ok((Digest::of_bytes(&canonical_json(&input)?), base))
}
