//! Building an image: resolve the base, hash every input into the derivation, reuse the store's
//! result for an unchanged derivation, otherwise build each layer, the config and the manifest.

use std::path::{Path, PathBuf};

use oci_spec::image::{
    Arch, Config, ConfigBuilder, Descriptor, ImageConfiguration, ImageConfigurationBuilder,
    ImageManifestBuilder, MediaType, Os, RootFsBuilder,
};

use crate::base::BaseImage;
use crate::canonical::canonical_json;
use crate::compress::Compression;
use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::inputs::HashCache;
use crate::layer::write_layer;
use crate::progress::Progress;
use crate::recipe::{ConfigSpec, DebPackage, LayerSpec, LoadedRecipe, Platform, WheelPin};
use crate::record::{ImageRecord, LayerRecord};
use crate::store::{Store, MEDIA_TYPE_CONFIG};

mod base;
mod collect;
mod computed;
mod derivation;
use base::resolve_base;
pub use base::ResolvedBase;
use collect::collect;
pub use collect::deb_file_name;
pub use derivation::derivation;

/// Bumped whenever the bytes arena-image produces for the same inputs would change.
pub const FORMAT: &str = "arena-image/3";

pub struct BuildContext<'a> {
    pub store: &'a Store,
    /// Where pinned `.deb` files are found (`apt-get download` output).
    pub deb_dir: Option<PathBuf>,
    /// Where pinned wheels are found (`ci/fetch-wheels.sh` output, or a directory of wheels).
    pub wheel_dir: Option<PathBuf>,
    pub progress: &'a dyn Progress,
    pub hashes: HashCache,
}

impl<'a> BuildContext<'a> {
    pub fn new(store: &'a Store, deb_dir: Option<PathBuf>, progress: &'a dyn Progress) -> Self {
        BuildContext {
            store,
            deb_dir,
            wheel_dir: None,
            progress,
            hashes: HashCache::load(store.root().join("arena/file-hashes.json")),
        }
    }

    pub fn with_wheel_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.wheel_dir = dir;
        self
    }
}

/// A layer with its source paths resolved.
#[derive(Debug, Clone)]
pub enum ResolvedLayer {
    Directory {
        path: PathBuf,
        target: String,
        owner: (u64, u64),
    },
    File {
        path: PathBuf,
        target: String,
        mode: Option<u32>,
        owner: (u64, u64),
    },
    Tarball {
        path: PathBuf,
        target: String,
        owner: (u64, u64),
        /// The pinned sha256 (hex) the archive must have, where the recipe pins one.
        sha256: Option<String>,
    },
    Task {
        path: PathBuf,
        target: String,
    },
    Debs {
        merged_usr: bool,
        packages: Vec<DebPackage>,
    },
    Wheels {
        site_packages: String,
        prefix: String,
        interpreter: String,
        wheels: Vec<WheelPin>,
    },
    Installed {
        site_packages: PathBuf,
        target: String,
        distributions: Vec<String>,
        exclude: Vec<String>,
    },
    Bytecode {
        interpreter: String,
        paths: Vec<String>,
    },
    /// Made by `command` in the root of `builder` (build/computed.rs).
    Build {
        builder: Box<ImageSpec>,
        sources: PathBuf,
        command: Vec<String>,
        outputs: Vec<String>,
    },
}

/// Everything an image is built from.
#[derive(Debug, Clone)]
pub struct ImageSpec {
    pub name: String,
    pub base: ResolvedBase,
    pub layers: Vec<ResolvedLayer>,
    pub config: ConfigSpec,
    pub mtime: u64,
    pub compression: Compression,
    pub platform: Platform,
    /// For task images: the task id and digest, recorded in the lockfile.
    pub task: Option<(String, String)>,
}

impl ImageSpec {
    pub fn from_recipe(r: &LoadedRecipe) -> Result<ImageSpec> {
        Self::from_recipe_at(r, 0)
    }

    /// `depth`: how many recipes above this one name it as their base.
    pub(crate) fn from_recipe_at(r: &LoadedRecipe, depth: usize) -> Result<ImageSpec> {
        let rec = &r.recipe;
        let base = ResolvedBase::from_recipe(r, depth)?;
        let mut layers = Vec::new();
        for (i, l) in rec.layers.iter().enumerate() {
            let f = |name: &str| format!("layer[{i}].{name}");
            layers.push(match l {
                LayerSpec::Directory {
                    path,
                    target,
                    uid,
                    gid,
                } => ResolvedLayer::Directory {
                    path: r.resolve_path(&f("path"), path)?,
                    target: target.clone(),
                    owner: (*uid, *gid),
                },
                LayerSpec::File {
                    path,
                    target,
                    mode,
                    uid,
                    gid,
                } => ResolvedLayer::File {
                    path: r.resolve_path(&f("path"), path)?,
                    target: target.clone(),
                    mode: mode
                        .as_deref()
                        .map(|m| u32::from_str_radix(m, 8).expect("checked at load")),
                    owner: (*uid, *gid),
                },
                LayerSpec::Tarball {
                    path,
                    target,
                    uid,
                    gid,
                    sha256,
                    url: _,
                } => ResolvedLayer::Tarball {
                    path: r.resolve_path(&f("path"), path)?,
                    target: target.clone(),
                    owner: (*uid, *gid),
                    sha256: sha256.clone(),
                },
                LayerSpec::Task { path, target } => ResolvedLayer::Task {
                    path: r.resolve_path(&f("path"), path)?,
                    target: target.clone(),
                },
                LayerSpec::Debs {
                    merged_usr,
                    packages,
                } => ResolvedLayer::Debs {
                    merged_usr: *merged_usr,
                    packages: packages.clone(),
                },
                LayerSpec::Bytecode { interpreter, paths } => ResolvedLayer::Bytecode {
                    interpreter: interpreter.clone(),
                    paths: paths.clone(),
                },
                LayerSpec::Build {
                    builder,
                    sources,
                    command,
                    outputs,
                } => ResolvedLayer::Build {
                    builder: Box::new(computed::builder_spec(
                        &r.resolve_path(&f("builder"), builder)?,
                    )?),
                    sources: r.resolve_path(&f("sources"), sources)?,
                    command: command.clone(),
                    outputs: outputs.clone(),
                },
                LayerSpec::Installed {
                    site_packages,
                    target,
                    distributions,
                    exclude,
                } => ResolvedLayer::Installed {
                    site_packages: r.resolve_path(&f("site_packages"), site_packages)?,
                    target: target.clone(),
                    distributions: distributions.clone(),
                    exclude: exclude.clone(),
                },
                LayerSpec::Wheels {
                    site_packages,
                    prefix,
                    interpreter,
                    wheels,
                } => ResolvedLayer::Wheels {
                    site_packages: site_packages.clone(),
                    prefix: prefix.clone(),
                    interpreter: interpreter.clone(),
                    wheels: wheels.clone(),
                },
            });
        }
        Ok(ImageSpec {
            name: rec.name.clone(),
            base,
            layers,
            config: rec.config.clone(),
            mtime: rec.mtime,
            compression: rec.compression,
            platform: rec.platform.clone(),
            task: None,
        })
    }
}

/// Merges the recipe's config into the base's.
fn make_config(
    spec: &ImageSpec,
    base: &BaseImage,
    diff_ids: Vec<String>,
) -> Result<ImageConfiguration> {
    let bad = |e: oci_spec::OciSpecError| {
        ImageError::invalid(format!("image {}", spec.name), e.to_string())
    };
    let mut cfg: Config = base
        .config
        .as_ref()
        .and_then(|c| c.config().clone())
        .unwrap_or_else(|| ConfigBuilder::default().build().expect("empty config"));
    let mut env: Vec<String> = cfg.env().clone().unwrap_or_default();
    for e in &spec.config.env {
        let name = e.split('=').next().unwrap_or("");
        env.retain(|old| old.split('=').next() != Some(name));
        env.push(e.clone());
    }
    cfg.set_env((!env.is_empty()).then_some(env));
    if let Some(w) = &spec.config.workdir {
        cfg.set_working_dir(Some(w.clone()));
    }
    if let Some(ep) = &spec.config.entrypoint {
        cfg.set_entrypoint(Some(ep.clone()));
    }
    if let Some(c) = &spec.config.cmd {
        cfg.set_cmd(Some(c.clone()));
    }
    if let Some(u) = &spec.config.user {
        cfg.set_user(Some(u.clone()));
    }
    let mut labels = cfg.labels().clone().unwrap_or_default();
    labels.extend(spec.config.labels.clone());
    if let Some((id, digest)) = &spec.task {
        labels.insert("dev.arena.task.id".into(), id.clone());
        labels.insert("dev.arena.task.digest".into(), digest.clone());
    }
    cfg.set_labels((!labels.is_empty()).then_some(labels));
    let rootfs = RootFsBuilder::default()
        .typ("layers")
        .diff_ids(diff_ids)
        .build()
        .map_err(bad)?;
    ImageConfigurationBuilder::default()
        .architecture(Arch::from(spec.platform.architecture.as_str()))
        .os(Os::from(spec.platform.os.as_str()))
        .config(cfg)
        .rootfs(rootfs)
        .build()
        .map_err(bad)
}

fn descriptor(media_type: &str, digest: &Digest, size: u64) -> Result<Descriptor> {
    let d = oci_spec::image::Digest::try_from(digest.as_str())
        .map_err(|e| ImageError::invalid(digest.to_string(), e.to_string()))?;
    Ok(Descriptor::new(MediaType::from(media_type), size, d))
}

/// Builds `spec` into the store, or returns the stored result of an unchanged derivation.
/// The second value says whether anything was built.
pub fn build(ctx: &BuildContext, spec: &ImageSpec) -> Result<(ImageRecord, bool)> {
    let (drv, base) = derivation(ctx, spec)?;
    ctx.hashes.save()?;
    if let Some(rec) = ctx.store.lookup_derivation(&drv) {
        ctx.store
            .set_ref(&rec.name, &rec.manifest, rec.manifest_size)?;
        ctx.progress.note(&format!(
            "{}: unchanged ({})",
            spec.name,
            rec.manifest.short()
        ));
        return Ok((rec, false));
    }
    let mut layers = base.layers.clone();
    let mut scratch_roots = Vec::new();
    for l in &spec.layers {
        let tree = match l {
            ResolvedLayer::Bytecode { interpreter, paths } => {
                computed::bytecode(ctx, &spec.name, &layers, interpreter, paths)?
            }
            ResolvedLayer::Build {
                builder,
                sources,
                command,
                outputs,
            } => {
                let (tree, root) = computed::build_output(
                    ctx, &spec.name, builder, sources, command, outputs, spec.mtime,
                )?;
                // The tree names files in the scratch root, read when the layer is written.
                scratch_roots.push(root);
                tree
            }
            other => collect(ctx, other)?,
        };
        ctx.progress.phase(
            &format!("compressing layer of {}", spec.name),
            Some(tree.content_bytes()),
        );
        let built = write_layer(ctx.store, &tree, spec.mtime, spec.compression, ctx.progress);
        ctx.progress.finish_phase();
        let built = built?;
        layers.push(LayerRecord {
            digest: built.digest,
            diff_id: built.diff_id,
            size: built.size,
            media_type: built.media_type,
        });
    }
    let diff_ids = layers.iter().map(|l| l.diff_id.to_string()).collect();
    let config = make_config(spec, &base, diff_ids)?;
    let config_bytes = canonical_json(&config)?;
    let config_digest = ctx.store.put_bytes(&config_bytes)?;
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(
            MEDIA_TYPE_CONFIG,
            &config_digest,
            config_bytes.len() as u64,
        )?)
        .layers(
            layers
                .iter()
                .map(|l| descriptor(&l.media_type, &l.digest, l.size))
                .collect::<Result<Vec<_>>>()?,
        )
        .build()
        .map_err(|e| ImageError::invalid(format!("image {}", spec.name), e.to_string()))?;
    let manifest_bytes = canonical_json(&manifest)?;
    let manifest_digest = ctx.store.put_bytes(&manifest_bytes)?;
    let rec = ImageRecord {
        name: spec.name.clone(),
        derivation: drv,
        base: base.id.clone(),
        task: spec.task.as_ref().map(|t| t.0.clone()),
        task_digest: spec.task.as_ref().map(|t| t.1.clone()),
        layers,
        config: config_digest,
        config_size: config_bytes.len() as u64,
        manifest: manifest_digest,
        manifest_size: manifest_bytes.len() as u64,
    };
    ctx.store.record_derivation(&rec)?;
    ctx.store
        .set_ref(&rec.name, &rec.manifest, rec.manifest_size)?;
    ctx.progress
        .note(&format!("{}: built {}", spec.name, rec.manifest.short()));
    Ok((rec, true))
}

/// The image of one task: the base image plus a task layer at `/task`.
pub fn task_image_spec(
    base: &ImageRecord,
    base_spec: &ImageSpec,
    set: &str,
    task_id: &str,
    task_dir: &Path,
) -> Result<ImageSpec> {
    let digest = arena_task::task_digest(task_dir)?;
    Ok(ImageSpec {
        name: format!("arena/{set}/{task_id}"),
        base: ResolvedBase::Stored {
            manifest: base.manifest.clone(),
            label: base.name.clone(),
        },
        layers: vec![ResolvedLayer::Task {
            path: task_dir.to_path_buf(),
            target: "/task".into(),
        }],
        config: ConfigSpec {
            workdir: Some("/task".into()),
            ..ConfigSpec::default()
        },
        mtime: base_spec.mtime,
        compression: base_spec.compression,
        platform: base_spec.platform.clone(),
        task: Some((task_id.to_string(), digest.to_string())),
    })
}
