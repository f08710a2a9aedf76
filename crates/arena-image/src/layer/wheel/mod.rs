//! Python wheels (PEP 427), installed the way pip installs one into a fixed prefix, but as a
//! pure function of the wheel's bytes: every file is checked against the wheel's own RECORD
//! (sha256 and size) and a file RECORD does not list is refused; `NAME.data/` schemes go to
//! their directories; `#!python` script shebangs name the image's interpreter; console and GUI
//! scripts from `entry_points.txt` are generated from one fixed template. No code of the wheel
//! runs at build time.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::path::Path;

use base64::Engine as _;
use sha2::{Digest as _, Sha256};

use crate::error::{ImageError, Result};
use crate::layer::archive::normalize_path;
use crate::layer::tree::{join_target, Content, EntryKind, LayerEntry, LayerTree};

pub mod compat;

/// Where a wheel's files go in the image.
#[derive(Debug, Clone)]
pub struct WheelPlacement<'a> {
    /// `purelib` and `platlib` (`/usr/local/lib/python3.11/dist-packages`).
    pub site_packages: &'a str,
    /// `scripts` go to PREFIX/bin, `data` to PREFIX, `headers` to PREFIX/include/NAME.
    pub prefix: &'a str,
    /// The interpreter scripts run with (`/usr/bin/python3`).
    pub interpreter: &'a str,
}

fn bad(path: &Path, message: String) -> ImageError {
    ImageError::Archive {
        path: path.to_path_buf(),
        message,
    }
}

/// The wrapper pip writes for a console script, with the interpreter fixed.
pub fn console_script(interpreter: &str, module: &str, attr: &str) -> String {
    let (head, call) = match attr.split_once('.') {
        Some((first, _)) => (first, attr),
        None => (attr, attr),
    };
    format!(
        "#!{interpreter}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom {module} import {head}\nif __name__ == \"__main__\":\n    sys.argv[0] = re.sub(r\"(-script\\.pyw|\\.exe)?$\", \"\", sys.argv[0])\n    sys.exit({call}())\n"
    )
}

/// `[console_scripts]` and `[gui_scripts]` of an entry_points.txt: name → (module, attr).
fn entry_scripts(path: &Path, text: &str) -> Result<BTreeMap<String, (String, String)>> {
    let ini = ini::Ini::load_from_str_noescape(text)
        .map_err(|e| bad(path, format!("entry_points.txt: {e}")))?;
    let mut out = BTreeMap::new();
    for section in ["console_scripts", "gui_scripts"] {
        let Some(props) = ini.section(Some(section)) else {
            continue;
        };
        for (name, value) in props.iter() {
            // `module:attr [extra]`; extras select nothing at install time.
            let value = value.split('[').next().unwrap_or(value).trim();
            let (module, attr) = value.split_once(':').ok_or_else(|| {
                bad(
                    path,
                    format!("entry_points.txt: [{section}] {name} = {value}: expected module:attr"),
                )
            })?;
            let ok = |s: &str| {
                !s.is_empty()
                    && s.split('.').all(|p| {
                        !p.is_empty()
                            && p.chars().all(|c| c.is_alphanumeric() || c == '_')
                            && !p.starts_with(|c: char| c.is_ascii_digit())
                    })
            };
            if !ok(module.trim()) || !ok(attr.trim()) || name.contains('/') || name.is_empty() {
                return Err(bad(
                    path,
                    format!(
                        "entry_points.txt: [{section}] `{name} = {value}` is not a script entry"
                    ),
                ));
            }
            out.insert(
                name.to_string(),
                (module.trim().to_string(), attr.trim().to_string()),
            );
        }
    }
    Ok(out)
}

/// One RECORD row: the urlsafe-base64 sha256 and the size, where given.
pub(crate) type RecordRow = (Option<String>, Option<u64>);

/// RECORD: path → its row.
pub(crate) fn read_record(path: &Path, text: &str) -> Result<BTreeMap<String, RecordRow>> {
    let mut out = BTreeMap::new();
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    for (i, row) in r.records().enumerate() {
        let row = row.map_err(|e| bad(path, format!("RECORD line {}: {e}", i + 1)))?;
        let file = row.get(0).unwrap_or("").to_string();
        if file.is_empty() {
            continue;
        }
        let hash = match row.get(1).unwrap_or("") {
            "" => None,
            h => Some(
                h.strip_prefix("sha256=")
                    .ok_or_else(|| {
                        bad(
                            path,
                            format!("RECORD line {}: `{h}`: only sha256 is accepted", i + 1),
                        )
                    })?
                    .to_string(),
            ),
        };
        let size = match row.get(2).unwrap_or("") {
            "" => None,
            s => Some(s.parse().map_err(|_| {
                bad(
                    path,
                    format!("RECORD line {}: size `{s}` is not a number", i + 1),
                )
            })?),
        };
        out.insert(file, (hash, size));
    }
    Ok(out)
}

/// Unpacks one wheel's files into `tree`; returns how many entries it added.
pub fn unpack_into(
    tree: &mut LayerTree,
    path: &Path,
    wheel: &[u8],
    place: &WheelPlacement,
    origin: &str,
) -> Result<usize> {
    let mut zip = zip::ZipArchive::new(Cursor::new(wheel))
        .map_err(|e| bad(path, format!("not a wheel (zip): {e}")))?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let infos: Vec<&String> = names
        .iter()
        .filter(|n| n.ends_with(".dist-info/WHEEL") && n.matches('/').count() == 1)
        .collect();
    let dist_info = match infos.as_slice() {
        [one] => one.trim_end_matches("/WHEEL").to_string(),
        _ => {
            return Err(bad(
                path,
                format!("expected one NAME.dist-info/WHEEL, found {}", infos.len()),
            ))
        }
    };
    let data_dir = format!("{}.data", dist_info.trim_end_matches(".dist-info"));
    let dist_name = dist_info
        .trim_end_matches(".dist-info")
        .rsplit_once('-')
        .map(|(n, _)| n.to_string())
        .unwrap_or_default();
    let mut read = |name: &str| -> Result<Vec<u8>> {
        let mut f = zip
            .by_name(name)
            .map_err(|e| bad(path, format!("{name}: {e}")))?;
        let mut buf = Vec::with_capacity(f.size() as usize);
        f.read_to_end(&mut buf)
            .map_err(|e| bad(path, format!("{name}: {e}")))?;
        Ok(buf)
    };
    // What pip checks before installing: the wheel's Requires-Python against the image's
    // Python (its tags are checked when the recipe is read).
    if let Some(python) = compat::python_of(place.site_packages) {
        let metadata = format!("{dist_info}/METADATA");
        if names.contains(&metadata) {
            compat::check_requires_python(&read(&metadata)?, python)
                .map_err(|why| bad(path, why))?;
        }
    }
    let record_name = format!("{dist_info}/RECORD");
    let record_text = String::from_utf8(read(&record_name)?)
        .map_err(|_| bad(path, "RECORD is not UTF-8".into()))?;
    let record = read_record(path, &record_text)?;
    let entry_points = match names
        .iter()
        .any(|n| *n == format!("{dist_info}/entry_points.txt"))
    {
        true => {
            let t = read(&format!("{dist_info}/entry_points.txt"))?;
            entry_scripts(path, &String::from_utf8_lossy(&t))?
        }
        false => BTreeMap::new(),
    };
    let unlisted = [
        record_name.clone(),
        format!("{dist_info}/RECORD.jws"),
        format!("{dist_info}/RECORD.p7s"),
    ];
    let mut added = 0;
    let mut add = |tree: &mut LayerTree, dest: String, bytes: Vec<u8>, mode: u32| -> Result<()> {
        // Namespace packages ship the same file in several wheels (every NVIDIA wheel has
        // `nvidia/__init__.py`): identical bytes and mode are one file. Different content is
        // refused (pip would keep whichever wheel came last).
        if let Some(LayerEntry {
            kind:
                EntryKind::File {
                    content: Content::Bytes(old),
                    ..
                },
            mode: old_mode,
            ..
        }) = tree.get(&dest)
        {
            if **old == bytes && *old_mode == mode {
                return Ok(());
            }
        }
        tree.insert(
            LayerEntry {
                path: dest,
                kind: EntryKind::bytes(bytes),
                mode,
                uid: 0,
                gid: 0,
            },
            origin,
        )?;
        added += 1;
        Ok(())
    };
    for i in 0..zip.len() {
        let mut f = zip
            .by_index(i)
            .map_err(|e| bad(path, format!("entry {i}: {e}")))?;
        if f.is_dir() {
            continue;
        }
        let raw = f.name().to_string();
        let Some(rel) = normalize_path(path, &raw)? else {
            continue;
        };
        let mut bytes = Vec::with_capacity(f.size() as usize);
        f.read_to_end(&mut bytes)
            .map_err(|e| bad(path, format!("{raw}: {e}")))?;
        let exec = f.unix_mode().is_some_and(|m| m & 0o111 != 0);
        drop(f);
        if !unlisted.contains(&rel) {
            let (hash, size) = record.get(&rel).ok_or_else(|| {
                bad(
                    path,
                    format!("{rel}: not listed in RECORD (refused: every file is checked)"),
                )
            })?;
            let want = hash
                .as_ref()
                .ok_or_else(|| bad(path, format!("{rel}: RECORD gives no hash")))?;
            let found =
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(&bytes));
            if found != want.trim_end_matches('=') {
                return Err(ImageError::DigestMismatch {
                    what: format!("{} entry {rel}", path.display()),
                    expected: format!("sha256={want} (RECORD)"),
                    found: format!("sha256={found}"),
                });
            }
            if size.is_some_and(|s| s != bytes.len() as u64) {
                return Err(ImageError::SizeMismatch {
                    what: format!("{} entry {rel}", path.display()),
                    expected: size.unwrap_or(0),
                    found: bytes.len() as u64,
                });
            }
        }
        let mode = if exec { 0o755 } else { 0o644 };
        let (dest, bytes, mode) = match rel.strip_prefix(&format!("{data_dir}/")) {
            None => (join_target(place.site_packages, &rel), bytes, mode),
            Some(rest) => {
                let (scheme, sub) = rest.split_once('/').unwrap_or((rest, ""));
                match scheme {
                    "purelib" | "platlib" => (join_target(place.site_packages, sub), bytes, mode),
                    "scripts" => {
                        let bytes = match bytes.strip_prefix(b"#!python") {
                            Some(after) => {
                                // `#!python` or `#!pythonw`, then the rest of the script.
                                let after = after.strip_prefix(b"w").unwrap_or(after);
                                let mut b = format!("#!{}", place.interpreter).into_bytes();
                                b.extend_from_slice(after);
                                b
                            }
                            None => bytes,
                        };
                        (
                            join_target(&join_target(place.prefix, "bin"), sub),
                            bytes,
                            0o755,
                        )
                    }
                    "headers" => (
                        join_target(
                            &join_target(place.prefix, &format!("include/{dist_name}")),
                            sub,
                        ),
                        bytes,
                        mode,
                    ),
                    "data" => (join_target(place.prefix, sub), bytes, mode),
                    other => {
                        return Err(bad(
                            path,
                            format!("{rel}: unknown wheel data scheme `{other}`"),
                        ))
                    }
                }
            }
        };
        add(tree, dest, bytes, mode)?;
    }
    for (name, (module, attr)) in &entry_points {
        let dest = join_target(&join_target(place.prefix, "bin"), name);
        add(
            tree,
            dest,
            console_script(place.interpreter, module, attr).into_bytes(),
            0o755,
        )?;
    }
    Ok(added)
}

#[cfg(test)]
mod tests;
