//! Image sets and lockfiles. A set (`images/sets.toml`) says which base recipe the tasks of
//! which types build on; `lock_set` builds the base and one image per task (base + task layer
//! at `/task`) and returns the lockfile that pins every digest. `verify` recomputes it all and
//! names each mismatch.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::build::{build, task_image_spec, BuildContext, ImageSpec};
use crate::error::{ImageError, Result};
use crate::recipe::{line_of, LoadedRecipe};
use crate::record::ImageRecord;
use crate::store::write_atomic;

pub const LOCK_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSet {
    pub name: String,
    /// Base recipe, relative to the sets file.
    pub recipe: String,
    /// Tasks root, relative to the sets file.
    pub tasks: String,
    pub task_types: Vec<String>,
    /// Recipes of agent images (relative to the sets file), each built as it is and locked
    /// under its recipe's name: an agent file runs in one as `image = "lock:<name>"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetsFile {
    set: Vec<ImageSet>,
}

pub fn load_sets(path: &Path) -> Result<Vec<ImageSet>> {
    let text = std::fs::read_to_string(path).map_err(|e| ImageError::io(path, e))?;
    let f: SetsFile = toml::from_str(&text).map_err(|e| ImageError::Parse {
        path: path.to_path_buf(),
        line: e.span().map_or(1, |s| line_of(&text, s.start)),
        message: e.message().to_string(),
    })?;
    Ok(f.set)
}

/// A registry tag a base recipe names, and the digest the first lock resolved it to: a later
/// lock or verify builds on that digest, whatever the tag names now (like a Nix fixed-output
/// input), until the pin is renewed (`arenactl lock --update-pins`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasePin {
    /// As the recipe names it (`docker.io/rocm/pytorch:TAG`).
    pub reference: String,
    /// `registry/repository@sha256:…`.
    pub pinned: String,
}

/// `lockfiles/NAME.lock`: every image of a set, sorted by name, with all its digests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    pub version: u32,
    pub set: String,
    /// The sets file, relative to the lockfile's directory.
    pub sets: String,
    #[serde(default, rename = "pin", skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<BasePin>,
    #[serde(rename = "image")]
    pub images: Vec<ImageRecord>,
}

const HEADER: &str =
    "# arena lockfile: every digest this image set needs. Written by `arenactl lock`;\n\
# `arenactl image verify --image-lock FILE` recomputes and checks it. Do not edit by hand.\n\n";

impl Lockfile {
    pub fn load(path: &Path) -> Result<Lockfile> {
        let text = std::fs::read_to_string(path).map_err(|e| ImageError::io(path, e))?;
        let lock: Lockfile = toml::from_str(&text).map_err(|e| ImageError::Parse {
            path: path.to_path_buf(),
            line: e.span().map_or(1, |s| line_of(&text, s.start)),
            message: e.message().to_string(),
        })?;
        if lock.version != LOCK_VERSION {
            return Err(ImageError::Parse {
                path: path.to_path_buf(),
                line: 1,
                message: format!(
                    "lockfile version {} (this arena reads {LOCK_VERSION})",
                    lock.version
                ),
            });
        }
        Ok(lock)
    }

    pub fn to_toml(&self) -> Result<String> {
        let body =
            toml::to_string(self).map_err(|e| ImageError::invalid("lockfile", e.to_string()))?;
        Ok(format!("{HEADER}{body}"))
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        write_atomic(path, self.to_toml()?.as_bytes())
    }

    /// The image of a task, by task id.
    pub fn task_image(&self, task_id: &str) -> Option<&ImageRecord> {
        self.images
            .iter()
            .find(|i| i.task.as_deref() == Some(task_id))
    }

    /// The sets file, resolved against the lockfile's own location.
    pub fn sets_path(&self, lockfile: &Path) -> PathBuf {
        lockfile.parent().unwrap_or(Path::new(".")).join(&self.sets)
    }
}

/// `to` relative to directory `from` (both made absolute first).
pub fn relative_path(from_dir: &Path, to: &Path) -> PathBuf {
    let abs = |p: &Path| {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        };
        // Lexical normalization (the target may not exist yet).
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    let (from, to) = (abs(from_dir), abs(to));
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut rel = PathBuf::new();
    for _ in from.components().skip(common) {
        rel.push("..");
    }
    for c in to.components().skip(common) {
        rel.push(c);
    }
    rel
}

/// The set named `set_name` in the sets file, and its base recipe.
pub fn set_recipe(sets_file: &Path, set_name: &str) -> Result<(ImageSet, LoadedRecipe)> {
    let sets = load_sets(sets_file)?;
    let set = sets.iter().find(|s| s.name == set_name).ok_or_else(|| {
        ImageError::invalid(
            sets_file.display().to_string(),
            format!(
                "no set named `{set_name}` (sets: {})",
                sets.iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    let base_dir = sets_file.parent().unwrap_or(Path::new("."));
    let recipe = LoadedRecipe::load(&base_dir.join(&set.recipe))?;
    Ok((set.clone(), recipe))
}

/// Builds (or finds unchanged in the store) every image of a set. A base recipe that names a
/// registry tag builds on its pin in `pins` (which the caller resolved on first lock, or read
/// from the lockfile); the lockfile returned carries the pin it used.
pub fn lock_set(
    ctx: &BuildContext,
    sets_file: &Path,
    set_name: &str,
    lockfile_dir: &Path,
    pins: &[BasePin],
) -> Result<Lockfile> {
    let (set, recipe) = set_recipe(sets_file, set_name)?;
    let base_dir = sets_file.parent().unwrap_or(Path::new("."));
    let mut used = Vec::new();
    let recipe = match recipe.base_tag() {
        None => recipe,
        Some(tag) => {
            let pin =
                pins.iter()
                    .find(|p| p.reference == tag)
                    .ok_or_else(|| ImageError::Recipe {
                        file: recipe.file.clone(),
                        field: "base.reference".into(),
                        message: format!(
                            "`{tag}` names a tag and the lockfile holds no pin for it: \
                         `arenactl lock` resolves it on first lock"
                        ),
                    })?;
            used.push(pin.clone());
            recipe.with_base_pin(&pin.pinned)?
        }
    };
    let base_spec = ImageSpec::from_recipe(&recipe)?;
    let (base, _) = build(ctx, &base_spec)?;
    let tasks_root = base_dir.join(&set.tasks);
    let mut images = vec![base.clone()];
    for found in arena_task::discover(&tasks_root)? {
        let task = arena_task::Task::load(&found.dir, &found.id)
            .map_err(|e| ImageError::invalid(format!("task {}", found.id), e.to_string()))?;
        if !set
            .task_types
            .iter()
            .any(|t| t == task.config.task_type.as_str())
        {
            continue;
        }
        let spec = task_image_spec(&base, &base_spec, &set.name, &found.id, &found.dir)?;
        let (rec, _) = build(ctx, &spec)?;
        images.push(rec);
    }
    for agent in &set.agents {
        let recipe = LoadedRecipe::load(&base_dir.join(agent))?;
        if images.iter().any(|i| i.name == recipe.recipe.name) {
            return Err(ImageError::invalid(
                sets_file.display().to_string(),
                format!(
                    "set `{}`: agent recipe `{agent}` is named `{}`, which another image of the set already is",
                    set.name, recipe.recipe.name
                ),
            ));
        }
        let (rec, _) = build(ctx, &ImageSpec::from_recipe(&recipe)?)?;
        images.push(rec);
    }
    images.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Lockfile {
        version: LOCK_VERSION,
        set: set.name.clone(),
        sets: relative_path(lockfile_dir, sets_file)
            .to_string_lossy()
            .into_owned(),
        pins: used,
        images,
    })
}

/// One difference between a lockfile and what its inputs produce now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// The task id, or the image name for images without a task.
    pub image: String,
    pub field: String,
    pub expected: String,
    pub found: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}: expected {}, found {}",
            self.image, self.field, self.expected, self.found
        )
    }
}

fn compare(expected: &ImageRecord, found: &ImageRecord, out: &mut Vec<Mismatch>) {
    let who = expected
        .task
        .clone()
        .unwrap_or_else(|| expected.name.clone());
    let mut check = |field: &str, e: String, f: String| {
        if e != f {
            out.push(Mismatch {
                image: who.clone(),
                field: field.to_string(),
                expected: e,
                found: f,
            });
        }
    };
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "(none)".into());
    check(
        "task digest",
        opt(&expected.task_digest),
        opt(&found.task_digest),
    );
    check(
        "derivation",
        expected.derivation.to_string(),
        found.derivation.to_string(),
    );
    check("base", expected.base.clone(), found.base.clone());
    check(
        "layer count",
        expected.layers.len().to_string(),
        found.layers.len().to_string(),
    );
    for (i, (e, f)) in expected.layers.iter().zip(&found.layers).enumerate() {
        check(
            &format!("layer {i} digest"),
            e.digest.to_string(),
            f.digest.to_string(),
        );
        check(
            &format!("layer {i} diff_id"),
            e.diff_id.to_string(),
            f.diff_id.to_string(),
        );
    }
    check(
        "config",
        expected.config.to_string(),
        found.config.to_string(),
    );
    check(
        "manifest",
        expected.manifest.to_string(),
        found.manifest.to_string(),
    );
}

/// Recomputes every image of a lockfile from its inputs and re-hashes every blob in the store.
pub fn verify(ctx: &BuildContext, lockfile: &Path) -> Result<Vec<Mismatch>> {
    let lock = Lockfile::load(lockfile)?;
    let now = lock_set(
        ctx,
        &lock.sets_path(lockfile),
        &lock.set,
        lockfile.parent().unwrap_or(Path::new(".")),
        &lock.pins,
    )?;
    let mut out = Vec::new();
    for e in &lock.images {
        match now.images.iter().find(|f| f.name == e.name) {
            Some(f) => compare(e, f, &mut out),
            None => out.push(Mismatch {
                image: e.task.clone().unwrap_or_else(|| e.name.clone()),
                field: "image".into(),
                expected: e.manifest.to_string(),
                found: "no such image any more (task removed or no longer of the set's types)"
                    .into(),
            }),
        }
    }
    for f in &now.images {
        if !lock.images.iter().any(|e| e.name == f.name) {
            out.push(Mismatch {
                image: f.task.clone().unwrap_or_else(|| f.name.clone()),
                field: "image".into(),
                expected: "not in the lockfile".into(),
                found: f.manifest.to_string(),
            });
        }
    }
    // The store's copies must still be what the lock says, byte for byte.
    for e in &lock.images {
        let blobs = std::iter::once((&e.manifest, e.manifest_size))
            .chain(std::iter::once((&e.config, e.config_size)))
            .chain(e.layers.iter().map(|l| (&l.digest, l.size)));
        for (d, size) in blobs {
            if let Err(err) = ctx.store.verify_blob(d, Some(size)) {
                out.push(Mismatch {
                    image: e.task.clone().unwrap_or_else(|| e.name.clone()),
                    field: format!("stored blob {d}"),
                    expected: format!("{size} bytes hashing to {d}"),
                    found: err.to_string(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative_path(Path::new("/r/lockfiles"), Path::new("/r/images/sets.toml")),
            PathBuf::from("../images/sets.toml")
        );
        assert_eq!(
            relative_path(Path::new("/a"), Path::new("/a/b")),
            PathBuf::from("b")
        );
        assert_eq!(
            relative_path(Path::new("/a/x/../y"), Path::new("/a/z")),
            PathBuf::from("../z")
        );
    }
}
