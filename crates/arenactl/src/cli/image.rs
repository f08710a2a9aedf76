//! Arguments of `arenactl image …` and of the registry a command pulls from or pushes to.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{ContainerdArgs, JsonFlag, LockArgs, StoreArgs};

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build a recipe (images/*.toml) into the store; unchanged inputs are not rebuilt. A
    /// registry base missing from the store is pulled first (by its pinned digest).
    Build {
        /// The recipe to build.
        #[arg(value_name = "RECIPE.toml")]
        recipe: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Import every image of a lockfile from the store into containerd and verify its digest.
    Load {
        /// The lockfile whose images are loaded.
        #[arg(long, value_name = "FILE")]
        image_lock: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        containerd: ContainerdArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Recompute every image of a lockfile and check every digest (exit 1 on any mismatch).
    Verify {
        /// The lockfile to check.
        #[arg(long, value_name = "FILE")]
        image_lock: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Resolve a registry reference (a tag) to the digest to pin in a recipe; fetches
    /// manifests only.
    Resolve {
        /// The reference to resolve.
        #[arg(value_name = "REGISTRY/REPO[:TAG|@DIGEST]")]
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Pull an image from a registry into the store, every blob verified while it streams;
    /// prints the pinned reference (`REGISTRY/REPO@sha256:…`) for a recipe's base.
    Pull {
        /// The image to pull.
        #[arg(value_name = "REGISTRY/REPO[:TAG|@DIGEST]")]
        reference: String,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Push a stored image (a manifest digest or a store name, e.g. a lockfile's image name)
    /// to a registry; the registry's digest is checked to be the store's.
    Push {
        /// The stored image: a manifest digest or a store name.
        #[arg(value_name = "IMAGE")]
        image: String,
        /// Where to push it.
        #[arg(value_name = "REGISTRY/REPO[:TAG]")]
        reference: String,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Build every image of an image set and write its lockfile (as `arenactl lock`).
    Lock(LockArgs),
    /// List the images in the store: digest, size of its blobs, and its name (the store's,
    /// or the task a given lockfile locks it for).
    Ls {
        /// Lockfiles whose names are shown beside their images (repeatable).
        #[arg(long = "image-lock", value_name = "FILE")]
        image_locks: Vec<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Remove every blob no given lockfile reaches (with the store's names and build records
    /// of what goes); prints what it freed.
    Prune(PruneArgs),
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// A lockfile whose images stay, with every blob they reach (repeatable; at least one).
    #[arg(long = "keep-lock", value_name = "FILE", required = true, num_args = 1..)]
    pub keep_locks: Vec<PathBuf>,
    /// Only print what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub out: JsonFlag,
}

/// How to reach registries.
#[derive(Debug, Args, Clone, Default)]
pub struct RegistryArgs {
    /// A registry spoken to over plain HTTP (repeatable); loopback hosts always are.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure: Vec<String>,
    /// Fetch REGISTRY's images from MIRROR (repeatable); digests are checked all the same.
    #[arg(long = "registry-mirror", value_name = "REGISTRY=MIRROR", value_parser = crate::arg_parse::mirror)]
    pub mirrors: Vec<String>,
    /// Docker-style credentials file (default: $DOCKER_CONFIG/config.json, else
    /// ~/.docker/config.json, where present; else anonymous).
    #[arg(long, value_name = "FILE")]
    pub auth_file: Option<PathBuf>,
    /// The platform a multi-platform index is resolved to.
    #[arg(long, default_value = "linux/amd64", value_name = "OS/ARCH", value_parser = crate::arg_parse::platform)]
    pub platform: String,
}
