//! Image recipes (`images/*.toml`): a base plus ordered layers, and the image config.
//! Paths are relative to the recipe file; `${VAR}` in a path is taken from the environment
//! (where air-gapped labs keep their imported base images).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::compress::Compression;
use crate::digest::Digest;
use crate::error::{ImageError, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Modification time of every layer entry, seconds since the epoch (SOURCE_DATE_EPOCH).
    #[serde(default)]
    pub mtime: u64,
    #[serde(default)]
    pub compression: Compression,
    #[serde(default)]
    pub platform: Platform,
    pub base: BaseSpec,
    #[serde(default, rename = "layer")]
    pub layers: Vec<LayerSpec>,
    #[serde(default)]
    pub config: ConfigSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
}

impl Default for Platform {
    fn default() -> Self {
        Platform {
            os: "linux".into(),
            architecture: "amd64".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BaseSpec {
    /// An empty root file system.
    Scratch,
    /// An OCI image layout on disk (a directory or a tar of one), pinned by manifest digest.
    OciLayout { path: String, manifest: Digest },
    /// A registry image pinned by digest (`registry/repo@sha256:…`). The build reads it from
    /// the store: `arenactl image build` and `lock` pull it there first where it is missing
    /// (arena-registry), or a bundle import brought it.
    Registry { reference: String },
    /// Another recipe (a path relative to this one), built first: this image is its layers
    /// and this recipe's.
    Recipe { path: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebPackage {
    pub name: String,
    pub version: String,
    #[serde(default = "default_arch")]
    pub arch: String,
    pub sha256: String,
}

fn default_arch() -> String {
    "amd64".into()
}

fn default_root() -> String {
    "/".into()
}

fn default_task_target() -> String {
    "/task".into()
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LayerSpec {
    Directory {
        path: String,
        #[serde(default = "default_root")]
        target: String,
        #[serde(default)]
        uid: u64,
        #[serde(default)]
        gid: u64,
    },
    File {
        path: String,
        /// Full path of the file in the image.
        target: String,
        /// Octal permission bits as a string (`"0755"`); default by the execute bit.
        #[serde(default)]
        mode: Option<String>,
        #[serde(default)]
        uid: u64,
        #[serde(default)]
        gid: u64,
    },
    Tarball {
        path: String,
        #[serde(default = "default_root")]
        target: String,
        #[serde(default)]
        uid: u64,
        #[serde(default)]
        gid: u64,
        /// The archive's sha256, checked when it is read (a package registry's tarball, for
        /// example): another file at `path` is refused.
        #[serde(default)]
        sha256: Option<String>,
        /// Where `ci/fetch-tarballs.sh` downloads it from; the build never reads it.
        #[serde(default)]
        url: Option<String>,
    },
    Task {
        path: String,
        #[serde(default = "default_task_target")]
        target: String,
    },
    /// Pinned Debian packages, unpacked like a first-stage debootstrap (no maintainer scripts).
    Debs {
        #[serde(default = "yes")]
        merged_usr: bool,
        packages: Vec<DebPackage>,
    },
    /// Pinned Python wheels (`pip --require-hashes`), installed as pip installs them into a
    /// fixed prefix, without running any of their code (layer/wheel).
    Wheels {
        /// `purelib`/`platlib` directory, e.g. `/usr/local/lib/python3.11/dist-packages`.
        site_packages: String,
        /// Scripts go to PREFIX/bin, `data` to PREFIX.
        #[serde(default = "default_prefix")]
        prefix: String,
        /// The interpreter of scripts and console-script wrappers.
        #[serde(default = "default_interpreter")]
        interpreter: String,
        wheels: Vec<WheelPin>,
    },
    /// Checked-hash bytecode for the `.py` files below `paths`, compiled at build time by the
    /// image's own `interpreter` from the layers below (layer/bytecode).
    Bytecode {
        #[serde(default = "default_interpreter")]
        interpreter: String,
        paths: Vec<String>,
    },
    /// Files a command makes at build time in another image's root (`builder`, a recipe of its
    /// own, built first and not part of this image), with `sources` at /src (read-only), no
    /// network and a fixed clock (layer/build_step). The files under `outputs` form the layer.
    Build {
        builder: String,
        sources: String,
        command: Vec<String>,
        outputs: Vec<String>,
    },
    /// Distributions installed in a Python environment on this host, taken by their RECORD
    /// files (every file checked against its recorded sha256; layer/installed).
    Installed {
        /// The environment's site-packages directory on this host.
        site_packages: String,
        /// Where that directory is in the image (RECORD's `../../bin/x` land beside it).
        target: String,
        /// Distribution names, or `["*"]` for every one installed there.
        distributions: Vec<String>,
        /// Distributions left out of `["*"]` (e.g. one whose files were changed after
        /// installation, which would otherwise be refused).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        exclude: Vec<String>,
    },
}

/// One wheel, pinned: its file name (which names the distribution, version and tags) and the
/// sha256 of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelPin {
    pub file: String,
    pub sha256: String,
}

impl WheelPin {
    /// The distribution and version the file name gives (`torch-2.10.0-cp311-….whl`).
    pub fn name_version(&self) -> Option<(&str, &str)> {
        let stem = self.file.strip_suffix(".whl")?;
        let mut parts = stem.splitn(3, '-');
        let (name, version) = (parts.next()?, parts.next()?);
        parts.next()?;
        Some((name, version))
    }
}

fn default_prefix() -> String {
    "/usr/local".into()
}

fn default_interpreter() -> String {
    "/usr/bin/python3".into()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSpec {
    /// `NAME=value`; replaces a base entry of the same name.
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// A recipe and the file it came from.
#[derive(Debug, Clone)]
pub struct LoadedRecipe {
    pub recipe: Recipe,
    pub file: PathBuf,
}

/// 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl LoadedRecipe {
    /// The registry base's reference when it names a tag, not a digest: what a lock pins.
    pub fn base_tag(&self) -> Option<&str> {
        match &self.recipe.base {
            BaseSpec::Registry { reference } if !reference.contains('@') => Some(reference),
            _ => None,
        }
    }

    /// The recipe with its tagged registry base replaced by `pinned` (REPO@sha256:…, from a
    /// lockfile or a resolve).
    pub fn with_base_pin(&self, pinned: &str) -> Result<LoadedRecipe> {
        let ok = pinned
            .rsplit_once('@')
            .is_some_and(|(_, d)| Digest::parse(d).is_ok());
        if !ok {
            return Err(self.field_error(
                "base.reference",
                format!("pin `{pinned}` is not REPO@sha256:…"),
            ));
        }
        let mut out = self.clone();
        out.recipe.base = BaseSpec::Registry {
            reference: pinned.to_string(),
        };
        Ok(out)
    }

    pub fn load(file: &Path) -> Result<LoadedRecipe> {
        let text = std::fs::read_to_string(file).map_err(|e| ImageError::io(file, e))?;
        let recipe: Recipe = toml::from_str(&text).map_err(|e| ImageError::Parse {
            path: file.to_path_buf(),
            line: e.span().map_or(1, |s| line_of(&text, s.start)),
            message: e.message().to_string(),
        })?;
        let loaded = LoadedRecipe {
            recipe,
            file: file.to_path_buf(),
        };
        loaded.check()?;
        Ok(loaded)
    }

    fn field_error(&self, field: &str, message: impl Into<String>) -> ImageError {
        ImageError::Recipe {
            file: self.file.clone(),
            field: field.to_string(),
            message: message.into(),
        }
    }

    fn check(&self) -> Result<()> {
        let r = &self.recipe;
        if r.name.is_empty() || r.name.contains(char::is_whitespace) {
            return Err(self.field_error("name", "must be non-empty, without spaces"));
        }
        if let BaseSpec::Registry { reference } = &r.base {
            // A tag is allowed here: `arenactl lock` pins it on first lock and the lockfile
            // keeps the digest. A digest part must be a digest.
            if let Some((_, d)) = reference.rsplit_once('@') {
                if Digest::parse(d).is_err() {
                    return Err(self.field_error(
                        "base.reference",
                        format!("`{reference}`: `{d}` is not a digest (expected sha256:…)"),
                    ));
                }
            } else if reference.is_empty() || reference.contains(char::is_whitespace) {
                return Err(self.field_error(
                    "base.reference",
                    format!("`{reference}` is not an image reference"),
                ));
            }
        }
        for (i, l) in r.layers.iter().enumerate() {
            match l {
                LayerSpec::Tarball {
                    sha256: Some(sha), ..
                } if Digest::parse(&format!("sha256:{sha}")).is_err() => {
                    return Err(self.field_error(
                        &format!("layer[{i}].sha256"),
                        format!("`{sha}` is not 64 lowercase hex digits"),
                    ));
                }
                LayerSpec::Debs { packages, .. } => {
                    if packages.is_empty() {
                        return Err(
                            self.field_error(&format!("layer[{i}].packages"), "no packages")
                        );
                    }
                    for (j, p) in packages.iter().enumerate() {
                        if Digest::parse(&format!("sha256:{}", p.sha256)).is_err() {
                            return Err(self.field_error(
                                &format!("layer[{i}].packages[{j}].sha256"),
                                format!("`{}` is not 64 lowercase hex digits", p.sha256),
                            ));
                        }
                    }
                }
                LayerSpec::Wheels {
                    wheels,
                    site_packages,
                    prefix,
                    interpreter,
                } => {
                    if wheels.is_empty() {
                        return Err(self.field_error(&format!("layer[{i}].wheels"), "no wheels"));
                    }
                    for (field, v) in [
                        ("site_packages", site_packages),
                        ("prefix", prefix),
                        ("interpreter", interpreter),
                    ] {
                        if !v.starts_with('/') || v.split('/').any(|c| c == "..") {
                            return Err(self.field_error(
                                &format!("layer[{i}].{field}"),
                                format!("`{v}` is not an absolute path without `..`"),
                            ));
                        }
                    }
                    let python = crate::layer::wheel::compat::python_of(site_packages);
                    for (j, w) in wheels.iter().enumerate() {
                        if w.name_version().is_none() || w.file.contains('/') {
                            return Err(self.field_error(
                                &format!("layer[{i}].wheels[{j}].file"),
                                format!(
                                    "`{}` is not a wheel file name (NAME-VERSION-…-TAG.whl)",
                                    w.file
                                ),
                            ));
                        }
                        if let Some(python) = python {
                            crate::layer::wheel::compat::check_tags(&w.file, python).map_err(
                                |why| {
                                    self.field_error(&format!("layer[{i}].wheels[{j}].file"), why)
                                },
                            )?;
                        }
                        if Digest::parse(&format!("sha256:{}", w.sha256)).is_err() {
                            return Err(self.field_error(
                                &format!("layer[{i}].wheels[{j}].sha256"),
                                format!("`{}` is not 64 lowercase hex digits", w.sha256),
                            ));
                        }
                    }
                }
                LayerSpec::Bytecode { interpreter, paths } => {
                    if paths.is_empty() {
                        return Err(self.field_error(&format!("layer[{i}].paths"), "no paths"));
                    }
                    if i == 0 && matches!(r.base, BaseSpec::Scratch) {
                        return Err(self.field_error(
                            &format!("layer[{i}]"),
                            "a bytecode layer needs layers below it with the interpreter",
                        ));
                    }
                    for (field, v) in std::iter::once(("interpreter", interpreter))
                        .chain(paths.iter().map(|p| ("paths", p)))
                    {
                        if !v.starts_with('/') || v.split('/').any(|c| c == "..") {
                            return Err(self.field_error(
                                &format!("layer[{i}].{field}"),
                                format!("`{v}` is not an absolute path without `..`"),
                            ));
                        }
                    }
                }
                LayerSpec::Build {
                    command, outputs, ..
                } => crate::layer::build_step::check_spec(command, outputs).map_err(
                    |(field, why)| self.field_error(&format!("layer[{i}].{field}"), why),
                )?,
                LayerSpec::Installed {
                    target,
                    distributions,
                    ..
                } => {
                    if distributions.is_empty() {
                        return Err(self.field_error(
                            &format!("layer[{i}].distributions"),
                            "no distributions (`[\"*\"]` takes every one)",
                        ));
                    }
                    if !target.starts_with('/') || target.split('/').any(|c| c == "..") {
                        return Err(self.field_error(
                            &format!("layer[{i}].target"),
                            format!("`{target}` is not an absolute path without `..`"),
                        ));
                    }
                }
                LayerSpec::File { mode: Some(m), .. }
                    if u32::from_str_radix(m, 8).map_or(true, |v| v > 0o7777) =>
                {
                    return Err(self.field_error(
                        &format!("layer[{i}].mode"),
                        format!("`{m}` is not an octal mode such as \"0755\""),
                    ));
                }
                _ => {}
            }
        }
        for (i, e) in r.config.env.iter().enumerate() {
            if !e.contains('=') {
                return Err(self.field_error(
                    &format!("config.env[{i}]"),
                    format!("`{e}` is not NAME=value"),
                ));
            }
        }
        Ok(())
    }

    /// Resolves a path of the recipe: `${VAR}` expanded, relative to the recipe's directory.
    pub fn resolve_path(&self, field: &str, raw: &str) -> Result<PathBuf> {
        let mut out = String::new();
        let mut rest = raw;
        while let Some(i) = rest.find("${") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| self.field_error(field, format!("unclosed `${{` in `{raw}`")))?;
            let var = &after[..end];
            let val = std::env::var(var).map_err(|_| {
                self.field_error(
                    field,
                    format!("`{raw}` needs the environment variable {var}, which is not set"),
                )
            })?;
            out.push_str(&val);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        let p = PathBuf::from(out);
        Ok(if p.is_absolute() {
            p
        } else {
            self.file.parent().unwrap_or(Path::new(".")).join(p)
        })
    }
}

#[cfg(test)]
mod tests;
