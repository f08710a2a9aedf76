//! Arguments of `arenactl image …` and of the registry a command pulls from or pushes to.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{ContainerdArgs, JsonFlag, StoreArgs};

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build a recipe (images/*.toml) into the store; unchanged inputs are not rebuilt. A
    /// registry base missing from the store is pulled first (by its pinned digest).
    Build {
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
        #[arg(value_name = "IMAGE")]
        image: String,
        #[arg(value_name = "REGISTRY/REPO[:TAG]")]
        reference: String,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
}

/// How to reach registries.
#[derive(Debug, Args, Clone, Default)]
pub struct RegistryArgs {
    /// A registry spoken to over plain HTTP (repeatable); loopback hosts always are.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure: Vec<String>,
    /// Fetch REGISTRY's images from MIRROR (repeatable); digests are checked all the same.
    #[arg(long = "registry-mirror", value_name = "REGISTRY=MIRROR")]
    pub mirrors: Vec<String>,
    /// Docker-style credentials file (default: $DOCKER_CONFIG/config.json, else
    /// ~/.docker/config.json, where present; else anonymous).
    #[arg(long, value_name = "FILE")]
    pub auth_file: Option<PathBuf>,
    /// The platform a multi-platform index is resolved to.
    #[arg(long, default_value = "linux/amd64", value_name = "OS/ARCH")]
    pub platform: String,
}
