//! Build layers (`kind = "build"`) for real: a command run in testbase's root (busybox +
//! Python, from the pinned .debs ci/fetch-debs.sh brings into target/arena-debs or
//! $ARENA_DEB_DIR), isolated by `unshare`. What it makes under its outputs is the layer, the same
//! bytes from two stores; it cannot write its sources or reach a network; a failed command, a
//! missing output and a builder that is itself built by a command are refused, named.

use std::path::{Path, PathBuf};
use std::process::Command;

use arena_image::{build, BuildContext, ImageSpec, LoadedRecipe, NoProgress, Store};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Fetched once per test binary: two fetches into one directory at once would race.
fn debs() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::var_os("ARENA_DEB_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("target/arena-debs"));
        let st = Command::new("bash")
            .arg(repo().join("ci/fetch-debs.sh"))
            .arg(repo().join("images/testbase.toml"))
            .arg(&dir)
            .status()
            .unwrap();
        assert!(st.success(), "ci/fetch-debs.sh images/testbase.toml");
        dir
    })
    .clone()
}

/// A recipe in `dir` whose one layer runs `script` (as /src/make.sh) in testbase's root.
fn recipe(dir: &Path, script: &str, outputs: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/make.sh"), script).unwrap();
    let file = dir.join("made.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"made\"\nmtime = 86400\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \
             \"build\"\nbuilder = \"{}\"\nsources = \"src\"\ncommand = [\"/bin/sh\", \
             \"/src/make.sh\"]\noutputs = [{outputs}]\n",
            repo().join("images/testbase.toml").display()
        ),
    )
    .unwrap();
    file
}

fn build_in(store: &Path, file: &Path) -> arena_image::Result<arena_image::ImageRecord> {
    let store = Store::open(store).unwrap();
    let ctx = BuildContext::new(&store, Some(debs()), &NoProgress);
    let spec = ImageSpec::from_recipe(&LoadedRecipe::load(file)?)?;
    build(&ctx, &spec).map(|(rec, _)| rec)
}

/// The files of a layer blob (zstd tar), by path, with their bytes.
fn layer_files(store: &Path, rec: &arena_image::ImageRecord) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let last = rec.layers.last().unwrap();
    let path = Store::open(store).unwrap().blob_path(&last.digest);
    let r = zstd::Decoder::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut ar = tar::Archive::new(r);
    let mut out = Vec::new();
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let mut bytes = Vec::new();
        e.read_to_end(&mut bytes).unwrap();
        out.push((name, bytes));
    }
    out
}

const MAKE: &str = r#"set -u
mkdir -p /opt/made
echo hello > /opt/made/hello
echo "$SOURCE_DATE_EPOCH $HOME $(pwd)" > /opt/made/env
if touch /src/written 2>/dev/null; then echo yes; else echo no; fi > /opt/made/src-writable
# Only a loopback interface, down: the build has no network.
cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' > /opt/made/interfaces
echo scratch > /tmp/left-behind
"#;

#[test]
fn a_build_layer_holds_what_its_command_made_the_same_from_two_stores() {
    let tmp = tempfile::tempdir().unwrap();
    let file = recipe(tmp.path(), MAKE, "\"/opt/made\"");
    let a = build_in(&tmp.path().join("store-a"), &file).unwrap();
    let b = build_in(&tmp.path().join("store-b"), &file).unwrap();
    assert_eq!(a.manifest, b.manifest, "the same inputs, the same image");
    let files = layer_files(&tmp.path().join("store-a"), &a);
    let get = |name: &str| {
        let (_, bytes) = files.iter().find(|(n, _)| n == name).unwrap_or_else(|| {
            panic!(
                "{name} in {:?}",
                files.iter().map(|f| &f.0).collect::<Vec<_>>()
            )
        });
        String::from_utf8(bytes.clone()).unwrap()
    };
    assert_eq!(get("opt/made/hello"), "hello\n");
    assert_eq!(get("opt/made/env"), "86400 /build /build\n");
    assert_eq!(get("opt/made/src-writable"), "no\n");
    assert_eq!(get("opt/made/interfaces"), "lo\n");
    // Only the outputs (and their parents) are in the layer: not the builder, not /tmp.
    assert!(
        files
            .iter()
            .all(|(n, _)| n.starts_with("opt/made") || n == "opt/"),
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    assert!(!tmp.path().join("src/written").exists());
}

#[test]
fn a_failed_command_or_a_missing_output_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let file = recipe(
        &tmp.path().join("fails"),
        "echo boom >&2; exit 3\n",
        "\"/opt/made\"",
    );
    let e = build_in(&tmp.path().join("store"), &file)
        .unwrap_err()
        .to_string();
    assert!(e.contains("failed") && e.contains("boom"), "{e}");

    let file = recipe(&tmp.path().join("missing"), "true\n", "\"/opt/made\"");
    let e = build_in(&tmp.path().join("store"), &file)
        .unwrap_err()
        .to_string();
    assert!(e.contains("/opt/made"), "{e}");

    let file = recipe(&tmp.path().join("mounted"), "true\n", "\"/tmp/x\"");
    let e = LoadedRecipe::load(&file).unwrap_err().to_string();
    assert!(
        e.contains("layer[0].outputs") && e.contains("/tmp/x"),
        "{e}"
    );

    // A builder whose own layer is built by a command.
    let inner = recipe(&tmp.path().join("inner"), "true\n", "\"/opt/made\"");
    let outer = tmp.path().join("outer.toml");
    std::fs::create_dir_all(tmp.path().join("src")).unwrap();
    std::fs::write(
        &outer,
        format!(
            "name = \"outer\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"build\"\nbuilder \
             = \"{}\"\nsources = \"src\"\ncommand = [\"true\"]\noutputs = [\"/opt/o\"]\n",
            inner.display()
        ),
    )
    .unwrap();
    let e = ImageSpec::from_recipe(&LoadedRecipe::load(&outer).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be built by a command"), "{e}");
}
