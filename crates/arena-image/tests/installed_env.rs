//! An `installed` layer from a real environment: a virtualenv made here with pip from three
//! small pinned wheels (fetched once by ci/fetch-wheels.sh, then cached). The layer holds what
//! the RECORDs list and nothing else, builds to one digest in two empty stores, and a file
//! changed after installation is refused, named.

use std::path::{Path, PathBuf};
use std::process::Command;

use arena_image::{build, BuildContext, ImageSpec, LoadedRecipe, NoProgress, Store};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

const PINS: &str = r#"name = "pins"
[base]
kind = "scratch"
[[layer]]
kind = "wheels"
site_packages = "/x"
wheels = [
  { file = "packaging-24.2-py3-none-any.whl", sha256 = "09abb1bccd265c01f4a3aa3f7a7db064b36514d2cba19a2f694fe6150451a759" },
  { file = "six-1.17.0-py2.py3-none-any.whl", sha256 = "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274" },
  { file = "wheel-0.45.1-py3-none-any.whl", sha256 = "708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248" },
]
"#;

fn run(c: &mut Command) {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A virtualenv with the three wheels installed by pip, offline from the wheel cache.
fn venv(dir: &Path) -> PathBuf {
    let wheels = std::env::var_os("ARENA_WHEEL_DIR")
        .map(PathBuf::from)
        // The user's wheel cache (arenactl's default too): it outlives a clean clone.
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/arena/wheels")))
        .unwrap_or_else(|| repo().join("target/arena-wheels"));
    std::fs::write(dir.join("pins.toml"), PINS).unwrap();
    run(Command::new("bash")
        .arg(repo().join("ci/fetch-wheels.sh"))
        .arg(dir.join("pins.toml"))
        .arg(&wheels));
    let v = dir.join("venv");
    run(Command::new("python3").arg("-m").arg("venv").arg(&v));
    run(Command::new(v.join("bin/pip"))
        .args(["install", "-q", "--no-index", "--find-links"])
        .arg(&wheels)
        .args(["six==1.17.0", "packaging==24.2", "wheel==0.45.1"])
        .env_remove("PIP_FIND_LINKS"));
    let sp = std::fs::read_dir(v.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages");
    assert!(sp.join("six.py").is_file());
    sp
}

fn recipe(dir: &Path, sp: &Path, dists: &str) -> PathBuf {
    let r = dir.join(format!("env-{}.toml", dists.len()));
    std::fs::write(
        &r,
        format!(
            "name = \"env\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"installed\"\nsite_packages = \"{}\"\ntarget = \"/opt/venv/lib/python3.11/site-packages\"\ndistributions = {dists}\n",
            sp.display()
        ),
    )
    .unwrap();
    r
}

fn build_in(store: &Path, recipe: &Path) -> arena_image::Result<arena_image::ImageRecord> {
    let store = Store::open(store).unwrap();
    let ctx = BuildContext::new(&store, None, &NoProgress);
    let spec = ImageSpec::from_recipe(&LoadedRecipe::load(recipe).unwrap()).unwrap();
    build(&ctx, &spec).map(|(r, _)| r)
}

/// The paths of a built image's single layer.
fn layer_paths(store: &Path, rec: &arena_image::ImageRecord) -> Vec<String> {
    let blob = store.join("blobs/sha256").join(rec.layers[0].digest.hex());
    let f = std::fs::File::open(blob).unwrap();
    let mut ar = tar::Archive::new(zstd::Decoder::new(f).unwrap());
    ar.entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect()
}

#[test]
fn an_installed_environment_is_taken_by_its_records() {
    let d = tempfile::tempdir().unwrap();
    let sp = venv(d.path());
    // Not installed by pip, so in no RECORD: never in the layer.
    std::fs::write(sp.join("stray.py"), "x = 1\n").unwrap();
    let r = recipe(d.path(), &sp, r#"["six", "Wheel"]"#);
    let a = build_in(&d.path().join("a"), &r).unwrap();
    let b = build_in(&d.path().join("b"), &r).unwrap();
    assert_eq!(a.manifest, b.manifest, "two empty stores, one digest");
    let paths = layer_paths(&d.path().join("a"), &a);
    let has = |p: &str| paths.iter().any(|x| x.trim_end_matches('/') == p);
    assert!(
        has("opt/venv/lib/python3.11/site-packages/six.py"),
        "{paths:?}"
    );
    assert!(has(
        "opt/venv/lib/python3.11/site-packages/wheel/__init__.py"
    ));
    // RECORD's `../../../bin/wheel` lands beside the site-packages directory's tree.
    assert!(has("opt/venv/bin/wheel"), "{paths:?}");
    assert!(!paths
        .iter()
        .any(|p| p.contains("stray.py") || p.ends_with(".pyc")));
    assert!(
        !paths.iter().any(|p| p.contains("site-packages/packaging/")),
        "not asked for"
    );
    // Every distribution: packaging too (and pip, which the venv brought).
    let all = build_in(&d.path().join("c"), &recipe(d.path(), &sp, r#"["*"]"#)).unwrap();
    let paths = layer_paths(&d.path().join("c"), &all);
    assert!(paths
        .iter()
        .any(|p| p.ends_with("site-packages/packaging/version.py")));

    // A distribution that is not there, and a file changed after pip installed it.
    let e = build_in(&d.path().join("d"), &recipe(d.path(), &sp, r#"["numpy"]"#))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("distribution `numpy` is not installed here"),
        "{e}"
    );
    let six = sp.join("six.py");
    let mut text = std::fs::read(&six).unwrap();
    text.extend_from_slice(b"\n# changed\n");
    std::fs::write(&six, text).unwrap();
    let e = build_in(&d.path().join("e"), &r).unwrap_err().to_string();
    assert!(
        e.contains("six.py (RECORD of six-1.17.0.dist-info): digest mismatch"),
        "{e}"
    );
}
