//! arena-image: the Nix-style image store. Recipes (`images/*.toml`) become OCI images whose
//! bytes are a pure function of their inputs: deterministic layers, canonical JSON, a
//! derivation hash over every input, a content-addressed store that is an OCI image layout,
//! lockfiles that pin every digest, and bundles that carry images to air-gapped machines.

pub mod base;
pub mod build;
pub mod bundle;
pub mod canonical;
pub mod compress;
pub mod digest;
pub mod error;
pub mod inputs;
pub mod layer;
pub mod lock;
pub mod progress;
pub mod recipe;
pub mod record;
pub mod store;

pub use build::{build, task_image_spec, BuildContext, ImageSpec};
pub use compress::Compression;
pub use digest::Digest;
pub use error::{ImageError, Result};
pub use lock::{lock_set, set_recipe, verify, BasePin, ImageSet, Lockfile, Mismatch};
pub use progress::{NoProgress, Progress};
pub use recipe::{LoadedRecipe, Recipe};
pub use record::{ImageRecord, LayerRecord};
pub use store::Store;
