//! An installed Python environment as a layer, driven by its distributions' RECORD files: the
//! files pip installed for each chosen distribution, each checked against the sha256 and size
//! RECORD gives, and nothing else (no caches, no stray files, no bytecode pip compiled with
//! host timestamps). For a GPU host whose own virtualenv is the only PyTorch it can bring in:
//! the layer is a function of the environment's recorded contents, not of its directory.

use std::io::Read;
use std::path::Path;

use base64::Engine as _;
use sha2::{Digest as _, Sha256};

use crate::error::{ImageError, Result};
use crate::layer::archive::normalize_path;
use crate::layer::tree::{join_target, Content, EntryKind, LayerEntry, LayerTree};
use crate::layer::wheel::read_record;

/// `Foo.Bar-1.0.dist-info` → `foo_bar` (PEP 503 names, compared with `_` for `-` and `.`).
fn normalized(name: &str) -> String {
    let mut out = String::new();
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('_');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

fn sha256_b64(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.finalize()),
        n,
    ))
}

/// Adds the recorded files of `distributions` (`*`: every one) installed in `site_packages`,
/// placed under `target` (paths RECORD gives relative to site-packages, `../../../bin/x`
/// included, land relative to `target`), less those named in `exclude`. Returns the
/// distributions taken, sorted.
pub fn add_installed(
    tree: &mut LayerTree,
    site_packages: &Path,
    target: &str,
    distributions: &[String],
    exclude: &[String],
) -> Result<Vec<String>> {
    let bad = |m: String| ImageError::Archive {
        path: site_packages.to_path_buf(),
        message: m,
    };
    let rd = std::fs::read_dir(site_packages).map_err(|e| ImageError::io(site_packages, e))?;
    let mut found: Vec<(String, String)> = Vec::new();
    for e in rd {
        let e = e.map_err(|e| ImageError::io(site_packages, e))?;
        let dir = e.file_name().to_string_lossy().into_owned();
        if let Some(stem) = dir.strip_suffix(".dist-info") {
            let name = stem.split('-').next().unwrap_or(stem);
            found.push((normalized(name), dir));
        }
    }
    found.sort();
    let all = distributions.iter().any(|d| d == "*");
    for want in distributions.iter().filter(|d| *d != "*").chain(exclude) {
        if !found.iter().any(|(n, _)| *n == normalized(want)) {
            return Err(bad(format!(
                "distribution `{want}` is not installed here (no {want}-*.dist-info)"
            )));
        }
    }
    // The target's parent directories, down to the image root, are where `..` may lead.
    let depth = target
        .trim_matches('/')
        .split('/')
        .filter(|c| !c.is_empty())
        .count();
    let mut taken = Vec::new();
    // Where each file came from and its recorded hash: namespace packages ship one file from
    // several distributions (every NVIDIA wheel has `nvidia/__init__.py`); the same recorded
    // content is one file, different content at one path is refused, naming both.
    let mut placed: std::collections::BTreeMap<String, (Option<String>, String)> =
        std::collections::BTreeMap::new();
    for (name, dir) in &found {
        if !all && !distributions.iter().any(|d| normalized(d) == *name) {
            continue;
        }
        if exclude.iter().any(|d| normalized(d) == *name) {
            continue;
        }
        let record_path = site_packages.join(dir).join("RECORD");
        let text =
            std::fs::read_to_string(&record_path).map_err(|e| ImageError::io(&record_path, e))?;
        let record = read_record(&record_path, &text)?;
        for (rel, (hash, size)) in &record {
            let up = rel.split('/').take_while(|c| *c == "..").count();
            if up > depth {
                return Err(bad(format!(
                    "{dir}/RECORD: `{rel}` leads outside the image root"
                )));
            }
            let rest = rel.split('/').skip(up).collect::<Vec<_>>().join("/");
            let Some(rest) = normalize_path(&record_path, &rest)? else {
                continue;
            };
            let base: Vec<&str> = target
                .trim_matches('/')
                .split('/')
                .filter(|c| !c.is_empty())
                .collect();
            let dest = join_target(&base[..base.len() - up].join("/"), &rest);
            // Bytecode the installer compiled on this host (source mtimes inside; some
            // installers record it with a hash, and it may since have been removed): left
            // out; the interpreter compiles what it needs (or a bytecode layer does).
            if rest.ends_with(".pyc") && rest.contains("__pycache__/") {
                continue;
            }
            if let Some((other_hash, other)) = placed.get(&dest) {
                if other_hash.is_some() && other_hash == hash {
                    continue;
                }
                return Err(bad(format!(
                    "`{dest}` is installed by both {other} and {dir} with different content"
                )));
            }
            // Checked below, once.
            placed.insert(dest.clone(), (hash.clone(), dir.clone()));
            let host = site_packages.join(rel);
            let meta = std::fs::symlink_metadata(&host).map_err(|e| ImageError::io(&host, e))?;
            if !meta.is_file() {
                return Err(bad(format!(
                    "{dir}/RECORD: `{rel}` is not a regular file here"
                )));
            }
            match hash {
                Some(want) => {
                    let (got, n) = sha256_b64(&host).map_err(|e| ImageError::io(&host, e))?;
                    if got != want.trim_end_matches('=') {
                        return Err(ImageError::DigestMismatch {
                            what: format!("{} (RECORD of {dir})", host.display()),
                            expected: format!("sha256={want}"),
                            found: format!("sha256={got}"),
                        });
                    }
                    if size.is_some_and(|s| s != n) {
                        return Err(ImageError::SizeMismatch {
                            what: format!("{} (RECORD of {dir})", host.display()),
                            expected: size.unwrap_or(0),
                            found: n,
                        });
                    }
                }
                // The distribution's own metadata (RECORD, INSTALLER, REQUESTED) is recorded
                // without a hash; anything else without one is not pinned and is refused.
                None if rel.starts_with(&format!("{dir}/")) => {}
                None => {
                    return Err(bad(format!(
                        "{dir}/RECORD: `{rel}` has no hash, so its content is not pinned"
                    )))
                }
            }
            use std::os::unix::fs::PermissionsExt;
            let mode = if meta.permissions().mode() & 0o111 != 0 {
                0o755
            } else {
                0o644
            };
            tree.insert(
                LayerEntry {
                    path: dest,
                    kind: EntryKind::File {
                        content: Content::Path(host.clone()),
                        size: meta.len(),
                    },
                    mode,
                    uid: 0,
                    gid: 0,
                },
                &format!("installed {dir}"),
            )?;
        }
        taken.push(dir.clone());
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_as_pep_503_normalizes_them() {
        assert_eq!(normalized("Typing.Extensions"), "typing_extensions");
        assert_eq!(
            normalized("nvidia-cuda--runtime_cu12"),
            "nvidia_cuda_runtime_cu12"
        );
    }

    /// Two distributions in `sp`, each recording `ns/__init__.py` with the given content.
    fn two_dists(sp: &Path, a: &[u8], b: &[u8]) {
        std::fs::create_dir_all(sp.join("ns")).unwrap();
        for (name, body) in [("alpha", a), ("beta", b)] {
            let dist = sp.join(format!("{name}-1.0.dist-info"));
            std::fs::create_dir_all(&dist).unwrap();
            let own = format!("ns/{name}.py");
            std::fs::write(sp.join(&own), body).unwrap();
            if name == "alpha" || a == b {
                std::fs::write(sp.join("ns/__init__.py"), body).unwrap();
            }
            let row = |p: &str, data: &[u8]| {
                let h =
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(data));
                format!("{p},sha256={h},{}\n", data.len())
            };
            let record = format!(
                "{}{}{name}-1.0.dist-info/RECORD,,\n",
                row("ns/__init__.py", body),
                row(&own, body)
            );
            std::fs::write(dist.join("RECORD"), record).unwrap();
        }
    }

    #[test]
    fn a_file_two_distributions_record_alike_is_one_file() {
        let d = tempfile::tempdir().unwrap();
        two_dists(d.path(), b"# ns\n", b"# ns\n");
        let mut tree = LayerTree::new();
        let taken = add_installed(&mut tree, d.path(), "/sp", &["*".into()], &[]).unwrap();
        assert_eq!(taken.len(), 2);
        assert!(tree.get("sp/ns/__init__.py").is_some());
        assert!(tree.get("sp/ns/alpha.py").is_some() && tree.get("sp/ns/beta.py").is_some());
    }

    #[test]
    fn one_path_recorded_with_two_contents_is_refused_naming_both() {
        let d = tempfile::tempdir().unwrap();
        // beta records other content for ns/__init__.py than alpha does: the conflict is
        // found from the RECORDs, before either file is read.
        two_dists(d.path(), b"# a\n", b"# b\n");
        let mut tree = LayerTree::new();
        let err = add_installed(&mut tree, d.path(), "/sp", &["*".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("alpha-1.0.dist-info"), "{err}");
        assert!(err.contains("beta-1.0.dist-info"), "{err}");
    }

    #[test]
    fn an_excluded_distribution_is_left_out_and_must_exist() {
        let d = tempfile::tempdir().unwrap();
        two_dists(d.path(), b"# a\n", b"# b\n");
        let mut tree = LayerTree::new();
        let taken =
            add_installed(&mut tree, d.path(), "/sp", &["*".into()], &["Beta".into()]).unwrap();
        assert_eq!(taken, vec!["alpha-1.0.dist-info".to_string()]);
        assert!(tree.get("sp/ns/beta.py").is_none());
        let err = add_installed(&mut tree, d.path(), "/sp", &["*".into()], &["gamma".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`gamma` is not installed"), "{err}");
    }
}
