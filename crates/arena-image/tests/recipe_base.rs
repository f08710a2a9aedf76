//! A recipe whose `[base]` is another recipe (`kind = "recipe"`): the base is built first (or
//! found unchanged), the image is its layers and the recipe's own, names the base by its
//! manifest digest, builds to the same digest in two empty stores, and changes when the base
//! recipe does. A recipe that names itself, or nests past the limit, is refused by field.

use std::path::Path;

use arena_image::{build, BuildContext, ImageSpec, LoadedRecipe, NoProgress, Store};

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn recipes(dir: &Path, base_file: &str) {
    write(dir, "a.txt", "base file\n");
    write(dir, "b.txt", "top file\n");
    write(
        dir,
        "base.toml",
        &format!(
            "name = \"base\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"file\"\npath = \"{base_file}\"\ntarget = \"/a.txt\"\n[config]\nenv = [\"A=1\"]\n"
        ),
    );
    write(
        dir,
        "top.toml",
        "name = \"top\"\n[base]\nkind = \"recipe\"\npath = \"base.toml\"\n[[layer]]\nkind = \"file\"\npath = \"b.txt\"\ntarget = \"/b.txt\"\n",
    );
}

fn build_top(dir: &Path, store: &Path) -> (arena_image::ImageRecord, Store) {
    let store = Store::open(store).unwrap();
    let ctx = BuildContext::new(&store, None, &NoProgress);
    let spec = ImageSpec::from_recipe(&LoadedRecipe::load(&dir.join("top.toml")).unwrap()).unwrap();
    let (rec, _) = build(&ctx, &spec).unwrap();
    (rec, store)
}

#[test]
fn an_image_builds_on_another_recipe_reproducibly() {
    let d = tempfile::tempdir().unwrap();
    recipes(d.path(), "a.txt");
    let (top, store) = build_top(d.path(), &d.path().join("s1"));
    let base = store
        .resolve_ref("base")
        .unwrap()
        .expect("the base is built and named");
    assert_eq!(top.base, base.digest.to_string());
    assert_eq!(top.layers.len(), 2, "the base's layer and its own");
    let base_rec = arena_image::base::base_from_store(&store, &base.digest).unwrap();
    assert_eq!(top.layers[0], base_rec.layers[0]);
    // The base's config reaches the image.
    let config = String::from_utf8(store.read_blob(&top.config).unwrap()).unwrap();
    assert!(config.contains("A=1"), "{config}");

    let (again, _) = build_top(d.path(), &d.path().join("s2"));
    assert_eq!(again.manifest, top.manifest, "same inputs, same digest");

    // Another base file: another base, so another image.
    write(d.path(), "c.txt", "other base file\n");
    recipes(d.path(), "c.txt");
    let (changed, _) = build_top(d.path(), &d.path().join("s3"));
    assert_ne!(changed.manifest, top.manifest);
    assert_ne!(changed.base, top.base);
}

#[test]
fn a_recipe_that_is_its_own_base_is_refused_by_field() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "loop.toml",
        "name = \"loop\"\n[base]\nkind = \"recipe\"\npath = \"loop.toml\"\n",
    );
    let err = ImageSpec::from_recipe(&LoadedRecipe::load(&d.path().join("loop.toml")).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("base.path") && err.contains("nest more than"),
        "{err}"
    );

    write(
        d.path(),
        "gone.toml",
        "name = \"gone\"\n[base]\nkind = \"recipe\"\npath = \"missing.toml\"\n",
    );
    let err = ImageSpec::from_recipe(&LoadedRecipe::load(&d.path().join("gone.toml")).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.toml"), "{err}");
}
