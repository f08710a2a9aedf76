//! Property tests of the image files arena reads: recipes, image-set files and
//! lockfiles come from a lab's repository or from another machine, so any edit of a real one
//! must be read or refused with an error that names the file, never a panic. Inputs that once
//! failed are kept beside this file (`.proptest-regressions`) and run first.

use std::path::{Path, PathBuf};

use arena_image::lock::{load_sets, Lockfile};
use arena_image::recipe::LoadedRecipe;
use arena_mutate::{noise, one_edited, Format};
use proptest::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const FILES: &[&str] = &[
    "lockfiles/cpu.lock",
    "images/sets.toml",
    "images/testbase.toml",
    "images/cuda-venv.toml",
    "images/cuda-host.toml",
    "images/rocm-pytorch.toml",
];

fn an_edited_file() -> impl Strategy<Value = (usize, Vec<u8>)> {
    let texts = FILES
        .iter()
        .map(|f| std::fs::read_to_string(repo().join(f)).unwrap());
    one_edited(texts.collect(), Format::Toml)
}

/// Reads `bytes` as the kind of file `name` is; the error's text where refused.
fn read_as(name: &str, path: &Path) -> Option<String> {
    if name.ends_with(".lock") {
        Lockfile::load(path).err().map(|e| e.to_string())
    } else if name.ends_with("sets.toml") {
        load_sets(path).err().map(|e| e.to_string())
    } else {
        LoadedRecipe::load(path).err().map(|e| e.to_string())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn an_edited_image_file_is_read_or_refused_naming_the_file((i, bytes) in an_edited_file()) {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(Path::new(FILES[i]).file_name().unwrap());
        std::fs::write(&path, &bytes).unwrap();
        if let Some(msg) = read_as(FILES[i], &path) {
            prop_assert!(msg.contains(&path.display().to_string()), "{msg}");
        }
    }

    #[test]
    fn any_text_is_refused_naming_the_file(text in noise(), kind in 0..3usize) {
        let d = tempfile::tempdir().unwrap();
        let name = ["x.lock", "sets.toml", "recipe.toml"][kind];
        let path = d.path().join(name);
        std::fs::write(&path, &text).unwrap();
        if let Some(msg) = read_as(name, &path) {
            prop_assert!(msg.contains(&path.display().to_string()), "{msg}");
        }
    }
}
