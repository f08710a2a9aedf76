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

/// Every agent recipe a set names loads, under a name no task image of the set can take.
#[test]
fn every_agent_recipe_of_a_set_loads() {
    let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../images");
    let mut n = 0;
    for s in arena_image::lock::load_sets(&images.join("sets.toml")).unwrap() {
        for a in &s.agents {
            let r = LoadedRecipe::load(&images.join(a)).unwrap_or_else(|e| panic!("{a}: {e}"));
            assert!(
                !r.recipe.name.starts_with("arena/"),
                "{a}: {}",
                r.recipe.name
            );
            n += 1;
        }
    }
    assert!(n >= 1);
}

/// A tarball layer pinned by sha256 builds from that archive only: another file at its path is
/// refused, naming the file and both digests.
#[test]
fn a_pinned_tarball_is_built_from_that_archive_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("src/package")).unwrap();
    std::fs::write(d.join("src/package/tool"), "#!/bin/sh\necho hi\n").unwrap();
    let st = std::process::Command::new("tar")
        .args(["czf", "t.tgz", "-C", "src", "package"])
        .current_dir(d)
        .status()
        .unwrap();
    assert!(st.success());
    let (good, _) = arena_image::Digest::of_file(&d.join("t.tgz")).unwrap();
    let store = arena_image::store::Store::open(&d.join("store")).unwrap();
    let ctx = arena_image::BuildContext::new(&store, None, &arena_image::NoProgress);
    for (pin, ok) in [(good.hex().to_string(), true), ("ab".repeat(32), false)] {
        let recipe = d.join(format!("r-{ok}.toml"));
        std::fs::write(
            &recipe,
            format!(
                "name = \"t\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"tarball\"\n\
                 path = \"t.tgz\"\ntarget = \"/opt/t\"\nsha256 = \"{pin}\"\n\
                 url = \"https://registry.example/t.tgz\"\n"
            ),
        )
        .unwrap();
        let r = LoadedRecipe::load(&recipe).unwrap();
        let got = arena_image::build(&ctx, &arena_image::ImageSpec::from_recipe(&r).unwrap());
        match (ok, got) {
            (true, Ok(_)) => {}
            (false, Err(e)) => {
                let e = e.to_string();
                assert!(
                    e.contains("t.tgz") && e.contains(&pin) && e.contains(good.hex()),
                    "{e}"
                );
            }
            (ok, got) => panic!("pinned {pin} (ok: {ok}): {:?}", got.map(|_| ())),
        }
    }
    std::fs::write(d.join("bad.toml"), "name = \"t\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"tarball\"\npath = \"t.tgz\"\nsha256 = \"xyz\"\n").unwrap();
    let e = LoadedRecipe::load(&d.join("bad.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("layer[0].sha256"), "{e}");
}
