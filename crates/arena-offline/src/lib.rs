//! arena-offline: the offline kit. One archive, made on a connected machine, holds everything
//! an air-gapped node needs to run arena: arenactl itself, the host tools (containerd, runc,
//! the CNI plugins and nft, as the locked `host-tools` image), the images of each lockfile as
//! bundles, the lockfiles with their sets file and task folders, agent files with what they
//! mount, and sealed hidden sets. A manifest names every file with its sha256; the kit's
//! digest is the sha256 of that manifest, so one printed digest pins every byte.
//!
//! `pack` writes the kit; `install` verifies it file by file (and against the digest the user
//! carried over, if given), imports the bundles into the store (each blob checked against its
//! lock), checks every task tree against its lockfile and every hidden set against its seal,
//! unpacks the host tools, and only then moves the whole prefix into place.

pub mod collect;
pub mod error;
pub mod install;
pub mod manifest;
pub mod pack;
mod tree;
mod unpack;

pub use collect::PackInputs;
pub use error::{OfflineError, Result};
pub use install::{install, verify_installed, Installed};
pub use manifest::{KitManifest, KIT_DIR, MANIFEST};
pub use pack::{pack, Packed};
