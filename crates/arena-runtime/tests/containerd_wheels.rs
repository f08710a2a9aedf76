//! A wheels layer for real: the testbase plus a small pinned wheel set fetched from PyPI
//! (`ci/fetch-wheels.sh`, cached in $ARENA_WHEEL_DIR, else ~/.cache/arena/wheels), built in two
//! empty stores to the same digests, then run in containerd: the packages import and a
//! generated console script runs; a bytecode layer over the wheels and a directory holding a
//! file that does not compile builds (that file named, left without bytecode) and the wheels
//! import from checked-hash `.pyc`.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use arena_image::{build, BuildContext, ImageSpec, LoadedRecipe, NoProgress, Store};
use arena_runtime::ContainerRuntime;
use common::*;

const WHEELS: &str = r#"
[[layer]]
kind = "wheels"
site_packages = "/usr/local/lib/python3.11/dist-packages"
wheels = [
  { file = "packaging-24.2-py3-none-any.whl", sha256 = "09abb1bccd265c01f4a3aa3f7a7db064b36514d2cba19a2f694fe6150451a759" },
  { file = "six-1.17.0-py2.py3-none-any.whl", sha256 = "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274" },
  { file = "wheel-0.45.1-py3-none-any.whl", sha256 = "708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248" },
]
"#;

#[test]
fn pinned_wheels_build_reproducibly_and_import_in_a_container() {
    let dir = tempfile::tempdir().unwrap();
    // The testbase recipe with the wheels layer added after its layers (the [config] table
    // stays last; its directory layer's path made absolute for the copy's new place).
    let base_text = std::fs::read_to_string(repo().join("images/testbase.toml")).unwrap();
    let (layers, config_table) = base_text.split_once("[config]").unwrap();
    let rootfs = repo().join("images/testbase/rootfs");
    // A package directory with one module that compiles and one that does not (packages ship
    // templates and Python 2 samples); then bytecode over it and the wheels.
    let extra = dir.path().join("extra");
    std::fs::create_dir_all(extra.join("opt/extra")).unwrap();
    std::fs::write(extra.join("opt/extra/good.py"), "X = 1\n").unwrap();
    std::fs::write(extra.join("opt/extra/bad.py"), "print 'python 2'\n").unwrap();
    let bytecode = format!(
        "\n[[layer]]\nkind = \"directory\"\npath = \"{}\"\n\n[[layer]]\nkind = \"bytecode\"\n\
         paths = [\"/usr/local/lib/python3.11/dist-packages\", \"/opt/extra\"]\n",
        extra.display()
    );
    let text = format!(
        "{}{WHEELS}{bytecode}\n[config]{config_table}",
        layers
            .replace("name = \"testbase\"", "name = \"testbase-wheels\"")
            .replace(
                "path = \"testbase/rootfs\"",
                &format!("path = \"{}\"", rootfs.display())
            )
    );
    let recipe = dir.path().join("testbase-wheels.toml");
    std::fs::write(&recipe, text).unwrap();
    let wheels = std::env::var_os("ARENA_WHEEL_DIR")
        .map(PathBuf::from)
        // The user's wheel cache (arenactl's default too): it outlives a clean clone.
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/arena/wheels")))
        .unwrap_or_else(|| repo().join("target/arena-wheels"));
    let ok = Command::new("bash")
        .arg(repo().join("ci/fetch-wheels.sh"))
        .arg(&recipe)
        .arg(&wheels)
        .status()
        .unwrap()
        .success();
    assert!(
        ok,
        "ci/fetch-wheels.sh failed (PyPI is needed once; then the cache serves)"
    );
    let debs = std::env::var_os("ARENA_DEB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/arena-debs"));
    let _ = testbase(); // fetches the debs
    let build_in = |name: &str| {
        let store = Store::open(&dir.path().join(name)).unwrap();
        let ctx = BuildContext::new(&store, Some(debs.clone()), &NoProgress)
            .with_wheel_dir(Some(wheels.clone()));
        let spec = ImageSpec::from_recipe(&LoadedRecipe::load(&recipe).unwrap()).unwrap();
        let rec = build(&ctx, &spec).unwrap().0;
        (store, rec)
    };
    let (store, rec) = build_in("a");
    let (_, again) = build_in("b");
    assert_eq!(rec.manifest, again.manifest, "two empty stores, one digest");
    assert_eq!(rec.layers, again.layers);

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let d = Daemon::start();
        let c = d.client().await;
        let image = c.ensure_image(&store, &rec).await.unwrap();
        let logs = dir.path().join("logs");
        let o = run(
            &c,
            &image,
            "wheels-import",
            config(&[
                "python3",
                "-c",
                "import six, packaging.version as v; print(six.__version__, v.Version('2.10.0').minor)",
            ]),
            Duration::from_secs(60),
            &logs,
        )
        .await;
        assert_eq!(o.exit_code, 0, "{}", read(&o.stderr));
        assert_eq!(read(&o.stdout).trim(), "1.17.0 10");
        // The standard library's bytecode comes from the image (the testbase's bytecode
        // layer): checked-hash .pyc, used by a Python that may not write any.
        let o = run(
            &c,
            &image,
            "wheels-bytecode",
            config(&[
                "python3",
                "-c",
                "import importlib.util, json; f = open(importlib.util.cache_from_source(json.__file__), 'rb'); print(f.read(8)[4:8].hex())",
            ]),
            Duration::from_secs(60),
            &logs,
        )
        .await;
        assert_eq!(o.exit_code, 0, "{}", read(&o.stderr));
        assert_eq!(read(&o.stdout).trim(), "03000000", "checked-hash flags");
        // The wheels' bytecode and good.py's are in the image, checked-hash; bad.py has none.
        let o = run(
            &c,
            &image,
            "wheels-own-bytecode",
            config(&[
                "python3",
                "-c",
                "import importlib.util, os, six; f = open(importlib.util.cache_from_source(six.__file__), 'rb'); print(f.read(8)[4:8].hex(), sorted(os.listdir('/opt/extra/__pycache__')))",
            ]),
            Duration::from_secs(60),
            &logs,
        )
        .await;
        assert_eq!(o.exit_code, 0, "{}", read(&o.stderr));
        assert_eq!(
            read(&o.stdout).trim(),
            "03000000 ['good.cpython-311.pyc']",
            "checked-hash bytecode for what compiles, none for what does not"
        );
        // The console script `wheel` is generated from entry_points.txt.
        let o = run(
            &c,
            &image,
            "wheels-script",
            config(&["wheel", "version"]),
            Duration::from_secs(60),
            &logs,
        )
        .await;
        assert_eq!(o.exit_code, 0, "{}", read(&o.stderr));
        assert!(read(&o.stdout).contains("0.45.1"), "{}", read(&o.stdout));
        assert_clean(&c).await;
    });
}
