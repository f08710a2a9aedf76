use super::*;

fn load(text: &str) -> Result<LoadedRecipe> {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.toml");
    std::fs::write(&f, text).unwrap();
    LoadedRecipe::load(&f).map(|mut r| {
        r.file = PathBuf::from("images/r.toml");
        r
    })
}

#[test]
fn parses_every_kind() {
    let r = load(
        r#"
name = "x"
mtime = 1700000000
compression = "gzip"
[base]
kind = "oci-layout"
path = "${HOME}/bases/rocm"
manifest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
[[layer]]
kind = "debs"
packages = [{ name = "a", version = "1:2", sha256 = "1111111111111111111111111111111111111111111111111111111111111111" }]
[[layer]]
kind = "directory"
path = "rootfs"
[[layer]]
kind = "file"
path = "f"
target = "/usr/local/bin/f"
mode = "0755"
[[layer]]
kind = "tarball"
path = "t.tar.gz"
target = "/opt"
[[layer]]
kind = "task"
path = "../tasks/x"
[config]
env = ["A=1"]
workdir = "/task"
labels = { "a.b" = "c" }
"#,
    )
    .unwrap();
    assert_eq!(r.recipe.layers.len(), 5);
    assert_eq!(r.recipe.compression, Compression::Gzip);
    assert!(matches!(&r.recipe.layers[4], LayerSpec::Task { target, .. } if target == "/task"));
    assert!(
        matches!(&r.recipe.layers[0], LayerSpec::Debs { merged_usr: true, packages } if packages[0].arch == "amd64")
    );
    let home = std::env::var("HOME").unwrap();
    assert_eq!(
        r.resolve_path("base.path", "${HOME}/bases/rocm").unwrap(),
        PathBuf::from(format!("{home}/bases/rocm"))
    );
    assert_eq!(
        r.resolve_path("p", "rootfs").unwrap(),
        PathBuf::from("images/rootfs")
    );
    let e = r
        .resolve_path("base.path", "${ARENA_NO_SUCH_VAR}/x")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "images/r.toml: base.path: `${ARENA_NO_SUCH_VAR}/x` needs the environment variable ARENA_NO_SUCH_VAR, which is not set"
    );
}

#[test]
fn errors_name_line_and_field() {
    let e = load("name = \"x\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"directory\"\npath = \"a\"\nbogus = 1\n")
        .unwrap_err()
        .to_string();
    // The span of an internally tagged table is the table itself: the layer starts on line 4.
    assert!(
        e.contains("line 4") && e.contains("unknown field `bogus`"),
        "{e}"
    );
    // A tag loads (a lock pins it); a build of it is refused, saying how to pin it.
    let tagged =
        load("name = \"x\"\n[base]\nkind = \"registry\"\nreference = \"rocm/pytorch:latest\"\n")
            .unwrap();
    assert_eq!(tagged.base_tag(), Some("rocm/pytorch:latest"));
    let e = crate::ImageSpec::from_recipe(&tagged)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("base.reference: `rocm/pytorch:latest` names a tag")
            && e.contains("arenactl lock"),
        "{e}"
    );
    let pinned = tagged
        .with_base_pin(&format!("docker.io/rocm/pytorch@sha256:{}", "a".repeat(64)))
        .unwrap();
    assert_eq!(pinned.base_tag(), None);
    assert!(tagged
        .with_base_pin("docker.io/rocm/pytorch:other")
        .is_err());
    let e =
        load("name = \"x\"\n[base]\nkind = \"registry\"\nreference = \"rocm/pytorch@sha256:12\"\n")
            .unwrap_err()
            .to_string();
    assert!(
        e.contains("base.reference: `rocm/pytorch@sha256:12`: `sha256:12` is not a digest"),
        "{e}"
    );
    let e = load("name = \"x\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"debs\"\npackages = [{name = \"a\", version = \"1\", sha256 = \"xyz\"}]\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("layer[0].packages[0].sha256: `xyz` is not 64 lowercase hex digits"),
        "{e}"
    );
}

#[test]
fn a_wheel_for_another_python_is_refused_naming_the_field() {
    let recipe = |file: &str| {
        format!(
            "name = \"x\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"wheels\"\n\
             site_packages = \"/usr/local/lib/python3.11/dist-packages\"\n\
             wheels = [{{ file = \"six-1.17.0-py2.py3-none-any.whl\", sha256 = \"{h}\" }},\n\
             {{ file = \"{file}\", sha256 = \"{h}\" }}]\n",
            h = "a".repeat(64)
        )
    };
    load(&recipe(
        "torch-2.10.0-3-cp311-cp311-manylinux_2_28_x86_64.whl",
    ))
    .unwrap();
    let e = load(&recipe(
        "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("layer[0].wheels[1].file") && e.contains("not for the image's Python 3.11"),
        "{e}"
    );
}
