//! What an image builds on, resolved from its recipe's `[base]`: nothing, an OCI layout on
//! disk, a manifest already in the store, or another recipe, built first (or found unchanged)
//! like a builder, so that an image can add a few layers to another image of the repository
//! (an agent CLI on the CUDA PyTorch base) without repeating its recipe.

use std::path::PathBuf;

use super::{build, BuildContext, ImageSpec};
use crate::base::{base_from_store, import_layout, BaseImage};
use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::recipe::{BaseSpec, LoadedRecipe};

/// How deep base recipes may nest: deeper is a cycle, or a design no one can follow.
const MAX_DEPTH: usize = 8;

#[derive(Debug, Clone)]
pub enum ResolvedBase {
    Scratch,
    OciLayout {
        path: PathBuf,
        manifest: Digest,
    },
    /// A manifest already in the store (a registry base imported by bundle, or a built image).
    Stored {
        manifest: Digest,
        label: String,
    },
    /// Another recipe's image.
    Recipe(Box<ImageSpec>),
}

impl ResolvedBase {
    pub(super) fn from_recipe(r: &LoadedRecipe, depth: usize) -> Result<ResolvedBase> {
        Ok(match &r.recipe.base {
            BaseSpec::Scratch => ResolvedBase::Scratch,
            BaseSpec::OciLayout { path, manifest } => ResolvedBase::OciLayout {
                path: r.resolve_path("base.path", path)?,
                manifest: manifest.clone(),
            },
            BaseSpec::Registry { reference } => {
                let Some((_, digest)) = reference.rsplit_once('@') else {
                    return Err(ImageError::Recipe {
                        file: r.file.clone(),
                        field: "base.reference".into(),
                        message: format!(
                            "`{reference}` names a tag, which a build cannot pin: `arenactl \
                             lock` pins it on first lock (the lockfile keeps the digest), or \
                             write REPO@sha256:… (`arenactl image resolve {reference}`)"
                        ),
                    });
                };
                ResolvedBase::Stored {
                    manifest: Digest::parse(digest)?,
                    label: reference.clone(),
                }
            }
            BaseSpec::Recipe { path } => {
                if depth >= MAX_DEPTH {
                    return Err(ImageError::Recipe {
                        file: r.file.clone(),
                        field: "base.path".into(),
                        message: format!(
                            "base recipes nest more than {MAX_DEPTH} deep (does one name itself?)"
                        ),
                    });
                }
                let file = r.resolve_path("base.path", path)?;
                let loaded = LoadedRecipe::load(&file)?;
                ResolvedBase::Recipe(Box::new(ImageSpec::from_recipe_at(&loaded, depth + 1)?))
            }
        })
    }
}

pub(super) fn resolve_base(ctx: &BuildContext, base: &ResolvedBase) -> Result<BaseImage> {
    match base {
        ResolvedBase::Scratch => Ok(BaseImage::scratch()),
        ResolvedBase::OciLayout { path, manifest } => {
            if ctx.store.has_blob(manifest) {
                if let Ok(b) = base_from_store(ctx.store, manifest) {
                    return Ok(b);
                }
            }
            ctx.progress
                .phase(&format!("importing base {}", path.display()), None);
            let b = import_layout(ctx.store, path, manifest, ctx.progress);
            ctx.progress.finish_phase();
            b
        }
        ResolvedBase::Stored { manifest, label } => {
            if !ctx.store.has_blob(manifest) {
                return Err(ImageError::Missing {
                    path: ctx.store.root().to_path_buf(),
                    what: format!(
                        "base {label} (manifest {manifest}); pull it with `arenactl image pull` \
                         (`image build` and `lock` do) or import a bundle"
                    ),
                });
            }
            base_from_store(ctx.store, manifest)
        }
        // Built (or found unchanged) first; the image names it by its manifest digest, as it
        // would a base pulled from a registry.
        ResolvedBase::Recipe(spec) => {
            let (rec, _) = build(ctx, spec)?;
            base_from_store(ctx.store, &rec.manifest)
        }
    }
}
