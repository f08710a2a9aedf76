//! Every recipe checked into images/ loads (fields, pins, paths' syntax), and the ROCm base
//! names the exact tag AgentKernelArena runs on, which a first lock pins.

use std::path::Path;

use arena_image::LoadedRecipe;

#[test]
fn every_recipe_in_the_tree_loads() {
    let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../images");
    let mut n = 0;
    for e in std::fs::read_dir(&images).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") && !p.ends_with("sets.toml") {
            LoadedRecipe::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            n += 1;
        }
    }
    assert!(n >= 5, "{n} recipes");
    let rocm = LoadedRecipe::load(&images.join("rocm-pytorch.toml")).unwrap();
    assert_eq!(
        rocm.base_tag(),
        Some("docker.io/rocm/pytorch:rocm7.1.1_ubuntu24.04_py3.12_pytorch_release_2.10.0")
    );
    // Every set names a recipe that exists.
    for s in arena_image::lock::load_sets(&images.join("sets.toml")).unwrap() {
        assert!(
            images.join(&s.recipe).is_file(),
            "set {}: {}",
            s.name,
            s.recipe
        );
    }
}
