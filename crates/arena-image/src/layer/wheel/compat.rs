//! Whether a wheel can run on the image's Python, as pip decides before installing it: the
//! file name's Python tags (`cp311`, `py3`, `cp39-abi3`) and METADATA's `Requires-Python`
//! (PEP 440 specifiers). A layer that installs what pip would refuse is refused: networkx 3.7
//! (`Requires-Python: >=3.12`) in a CPython 3.11 image installs and may even import, until a
//! module that uses 3.12 syntax is reached.

use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};

/// The image's Python, as `major.minor`, where the site-packages directory names it
/// (`/usr/local/lib/python3.11/dist-packages`); None where it does not (nothing is checked).
pub fn python_of(site_packages: &str) -> Option<(u64, u64)> {
    site_packages.split('/').find_map(|c| {
        let (major, minor) = c.strip_prefix("python")?.split_once('.')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    })
}

/// Whether one Python tag of a wheel's name runs on CPython `major.minor` (pip's own order:
/// `cpXY` of exactly this version, `cpXZ` with the stable ABI for Z ≤ Y, `pyX`, `pyXZ` for
/// Z ≤ Y).
fn tag_fits(tag: &str, abi: &str, (major, minor): (u64, u64)) -> bool {
    // `311` → (3, Some(11)); `3` → (3, None).
    let split = |d: &str| -> Option<(u64, Option<u64>)> {
        let m = d.get(..1)?.parse().ok()?;
        let rest = &d[1..];
        let n = match rest.is_empty() {
            true => None,
            false => Some(rest.parse().ok()?),
        };
        Some((m, n))
    };
    if let Some(d) = tag.strip_prefix("cp") {
        return match split(d) {
            Some((m, Some(n))) if m == major => n == minor || (abi == "abi3" && n <= minor),
            _ => false,
        };
    }
    match tag.strip_prefix("py").and_then(split) {
        Some((m, None)) => m == major,
        Some((m, Some(n))) => m == major && n <= minor,
        None => false,
    }
}

/// Why a wheel's file name's Python tags all exclude the image's Python, if they do.
pub fn check_tags(file: &str, python: (u64, u64)) -> Result<(), String> {
    let stem = file.strip_suffix(".whl").unwrap_or(file);
    let parts: Vec<&str> = stem.split('-').collect();
    let [.., py, abi, _platform] = parts.as_slice() else {
        return Err(format!(
            "`{file}` is not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)"
        ));
    };
    if py.split('.').any(|t| tag_fits(t, abi, python)) {
        return Ok(());
    }
    Err(format!(
        "`{file}` is built for Python `{py}` (ABI `{abi}`), not for the image's Python {}.{} \
         (the layer's site_packages names it): pip would refuse it",
        python.0, python.1
    ))
}

/// Why a wheel's METADATA `Requires-Python` excludes the image's Python, if it does.
pub fn check_requires_python(metadata: &[u8], python: (u64, u64)) -> Result<(), String> {
    let (headers, _) = mailparse::parse_headers(metadata).map_err(|e| format!("METADATA: {e}"))?;
    let Some(spec) = headers.iter().find_map(|h| {
        h.get_key_ref()
            .eq_ignore_ascii_case("Requires-Python")
            .then(|| h.get_value())
    }) else {
        return Ok(());
    };
    let specifiers = VersionSpecifiers::from_str(spec.trim()).map_err(|e| {
        format!("METADATA: Requires-Python `{spec}` is not a PEP 440 specifier: {e}")
    })?;
    // The layer knows the Python's minor version, not its patch release: a specifier that
    // some 3.11.x satisfies (`>=3.11.4`) is let through, one that none does is refused.
    if (0..100).any(|patch| specifiers.contains(&Version::new([python.0, python.1, patch]))) {
        return Ok(());
    }
    Err(format!(
        "METADATA: Requires-Python `{}` excludes the image's Python {}.{} (the layer's \
         site_packages names it): pip would refuse it; pin a version that supports it",
        spec.trim(),
        python.0,
        python.1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P311: (u64, u64) = (3, 11);

    #[test]
    fn the_python_is_read_off_site_packages() {
        assert_eq!(
            python_of("/usr/local/lib/python3.11/dist-packages"),
            Some(P311)
        );
        assert_eq!(
            python_of("/opt/venv/lib/python3.12/site-packages"),
            Some((3, 12))
        );
        assert_eq!(python_of("/x"), None);
        assert_eq!(python_of("/usr/lib/pythonX.Y/x"), None);
    }

    #[test]
    fn tags_fit_as_pip_orders_them() {
        for ok in [
            "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            "six-1.17.0-py2.py3-none-any.whl",
            "x-1-py3-none-any.whl",
            "x-1-py310-none-any.whl",
            "x-1-cp39-abi3-manylinux_2_17_x86_64.whl",
            "x-1-1build-cp311-cp311-linux_x86_64.whl",
        ] {
            check_tags(ok, P311).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for no in [
            "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl",
            "x-1-cp310-cp310-linux_x86_64.whl",
            "x-1-py2-none-any.whl",
            "x-1-py312-none-any.whl",
            "x-1-cp312-abi3-linux_x86_64.whl",
            "x-1-pp310-pypy310_pp73-linux_x86_64.whl",
        ] {
            let e = check_tags(no, P311).unwrap_err();
            assert!(e.contains("Python 3.11"), "{no}: {e}");
        }
        assert!(check_tags("notawheel.whl", P311).is_err());
    }

    #[test]
    fn requires_python_is_held_to() {
        let meta = |rp: &str| {
            format!("Metadata-Version: 2.4\nName: networkx\nVersion: 3.7\n{rp}\nsome body\n")
        };
        for ok in [
            "Requires-Python: >=3.11",
            "Requires-Python: !=3.14.1,>=3.11",
            "requires-python: >=3.9, <4",
            "Requires-Python: >=3.11.4",
            "Requires-Python: >3.11",
            "Summary: no Requires-Python at all",
        ] {
            check_requires_python(meta(ok).as_bytes(), P311)
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        let e = check_requires_python(meta("Requires-Python: !=3.14.1,>=3.12").as_bytes(), P311)
            .unwrap_err();
        assert!(e.contains(">=3.12") && e.contains("3.11"), "{e}");
        let e =
            check_requires_python(meta("Requires-Python: >=three").as_bytes(), P311).unwrap_err();
        assert!(e.contains("not a PEP 440 specifier"), "{e}");
    }
}
