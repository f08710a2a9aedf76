//! Gathering a layer's contents: the files of a directory, file or task source, or the
//! unpacked contents of pinned `.deb` packages and wheels found in their directories.

use std::path::PathBuf;

use super::{BuildContext, ResolvedLayer};
use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::layer::sources::{add_directory, add_file, add_task, Owner};
use crate::layer::wheel::{self, WheelPlacement};
use crate::layer::{deb, LayerTree};
use crate::recipe::{DebPackage, WheelPin};

/// The file name `apt-get download` gives a package (`:` of the epoch escaped as `%3a`).
pub fn deb_file_name(p: &DebPackage) -> String {
    format!(
        "{}_{}_{}.deb",
        p.name,
        p.version.replace(':', "%3a"),
        p.arch
    )
}

fn find_deb(ctx: &BuildContext, p: &DebPackage) -> Result<PathBuf> {
    let dir = ctx.deb_dir.as_ref().ok_or_else(|| {
        ImageError::invalid(
            format!("package {}={}", p.name, p.version),
            "no .deb directory given (--deb-dir or ARENA_DEB_DIR)",
        )
    })?;
    let path = dir.join(deb_file_name(p));
    if !path.is_file() {
        return Err(ImageError::Missing {
            path: dir.clone(),
            what: format!(
                "{} (package {}={} {}; fetch it with ci/fetch-debs.sh)",
                deb_file_name(p),
                p.name,
                p.version,
                p.arch
            ),
        });
    }
    Ok(path)
}

fn find_wheel(ctx: &BuildContext, w: &WheelPin) -> Result<PathBuf> {
    let dir = ctx.wheel_dir.as_ref().ok_or_else(|| {
        ImageError::invalid(
            format!("wheel {}", w.file),
            "no wheel directory given (--wheel-dir or ARENA_WHEEL_DIR)",
        )
    })?;
    let path = dir.join(&w.file);
    if !path.is_file() {
        return Err(ImageError::Missing {
            path: dir.clone(),
            what: format!("{} (fetch it with ci/fetch-wheels.sh)", w.file),
        });
    }
    Ok(path)
}

/// Reads a pinned file, refusing it unless it has the pinned sha256.
fn read_pinned(path: &std::path::Path, sha256: &str, what: &str) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| ImageError::io(path, e))?;
    let found = Digest::of_bytes(&bytes);
    if found.hex() != sha256 {
        return Err(ImageError::DigestMismatch {
            what: format!("{} ({what})", path.display()),
            expected: format!("sha256:{sha256}"),
            found: found.to_string(),
        });
    }
    Ok(bytes)
}

/// Reads the layer's entries (the cheap part for host sources: stat only).
pub(super) fn collect(ctx: &BuildContext, layer: &ResolvedLayer) -> Result<LayerTree> {
    let mut tree = LayerTree::new();
    match layer {
        ResolvedLayer::Directory {
            path,
            target,
            owner,
        } => {
            let o = Owner {
                uid: owner.0,
                gid: owner.1,
            };
            add_directory(&mut tree, path, target, o, &path.display().to_string())?;
        }
        ResolvedLayer::File {
            path,
            target,
            mode,
            owner,
        } => {
            let o = Owner {
                uid: owner.0,
                gid: owner.1,
            };
            add_file(
                &mut tree,
                path,
                target,
                *mode,
                o,
                &path.display().to_string(),
            )?;
        }
        ResolvedLayer::Task { path, target } => {
            add_task(&mut tree, path, target, &path.display().to_string())?;
        }
        ResolvedLayer::Tarball {
            path,
            target,
            owner,
            ..
        } => {
            let f = std::fs::File::open(path).map_err(|e| ImageError::io(path, e))?;
            let r = crate::compress::decompressing_reader(std::io::BufReader::new(f))
                .map_err(|e| ImageError::io(path, e))?;
            let keep = |p: &str| p.to_string();
            crate::layer::archive::read_tar_into(
                &mut tree,
                r,
                path,
                &crate::layer::archive::Placement {
                    target,
                    rewrite: &keep,
                    uid: owner.0,
                    gid: owner.1,
                    origin: &path.display().to_string(),
                },
            )?;
        }
        ResolvedLayer::Debs {
            merged_usr,
            packages,
        } => {
            if *merged_usr {
                for d in ["bin", "sbin", "lib", "lib64"] {
                    tree.insert(
                        crate::layer::LayerEntry {
                            path: d.into(),
                            kind: crate::layer::EntryKind::Symlink {
                                target: format!("usr/{d}"),
                            },
                            mode: 0o777,
                            uid: 0,
                            gid: 0,
                        },
                        "merged /usr",
                    )?;
                }
            }
            for p in packages {
                let path = find_deb(ctx, p)?;
                let bytes = read_pinned(
                    &path,
                    &p.sha256,
                    &format!("package {}={}", p.name, p.version),
                )?;
                deb::unpack_into(
                    &mut tree,
                    &path,
                    &bytes,
                    *merged_usr,
                    &format!("package {}", p.name),
                )?;
            }
        }
        ResolvedLayer::Bytecode { .. } | ResolvedLayer::Build { .. } => {
            return Err(ImageError::invalid(
                "bytecode or build layer",
                "computed while the image is built (build/computed.rs), not collected",
            ))
        }
        ResolvedLayer::Installed {
            site_packages,
            target,
            distributions,
            exclude,
        } => {
            crate::layer::installed::add_installed(
                &mut tree,
                site_packages,
                target,
                distributions,
                exclude,
            )?;
        }
        ResolvedLayer::Wheels {
            site_packages,
            prefix,
            interpreter,
            wheels,
        } => {
            let place = WheelPlacement {
                site_packages,
                prefix,
                interpreter,
            };
            for w in wheels {
                let path = find_wheel(ctx, w)?;
                let bytes = read_pinned(&path, &w.sha256, &format!("wheel {}", w.file))?;
                wheel::unpack_into(
                    &mut tree,
                    &path,
                    &bytes,
                    &place,
                    &format!("wheel {}", w.file),
                )?;
            }
        }
    }
    tree.add_parents();
    Ok(tree)
}
