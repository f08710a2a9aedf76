//! Arguments of `arenactl offline …`: the air-gapped path as one archive.

use std::path::PathBuf;

use clap::Subcommand;

use super::{JsonFlag, StoreArgs};

#[derive(Debug, Subcommand)]
pub enum OfflineCommand {
    /// On a connected machine: write one kit with arenactl, the host tools (containerd, runc,
    /// CNI plugins, nft), the images of each lockfile, the lockfiles with their sets file and
    /// task folders, agent files with what they mount, and sealed hidden sets. Prints the
    /// kit's digest: carry it over apart from the kit and give it to `install --expect`.
    Pack {
        /// A lockfile of the runs the kit is for (repeat for several).
        #[arg(long = "image-lock", value_name = "FILE", required = true)]
        image_locks: Vec<PathBuf>,
        /// The host tools' lockfile.
        #[arg(long, value_name = "FILE", default_value = "lockfiles/host-tools.lock")]
        host_lock: PathBuf,
        /// An agent file, with the files its `[[mount]]`s name (repeat for several).
        #[arg(long = "agent", value_name = "FILE")]
        agents: Vec<PathBuf>,
        /// A sealed hidden set (`arenactl unseen generate`; repeat for several).
        #[arg(long = "hidden", value_name = "DIR")]
        hidden: Vec<PathBuf>,
        /// The checkout the lockfiles, agent files and tasks lie in: the kit keeps their
        /// paths relative to it.
        #[arg(long, value_name = "DIR", default_value = ".")]
        root: PathBuf,
        /// The kit to write.
        #[arg(short = 'o', long = "out", alias = "output", value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// On the offline node: verify a kit file by file, import its images, check its tasks and
    /// hidden sets, unpack the host tools, and only then create PREFIX. Run it with the kit's
    /// own arenactl: `tar -xf KIT arena-offline/bin/arenactl`.
    Install {
        /// The kit (the tar `pack` wrote, or that tar extracted: the directory holding
        /// MANIFEST.json).
        #[arg(value_name = "KIT")]
        kit: PathBuf,
        /// Where to install (new, or an empty directory).
        #[arg(long, value_name = "DIR")]
        prefix: PathBuf,
        /// The digest `pack` printed: the install is refused unless the kit is that kit.
        #[arg(long, value_name = "sha256:…", value_parser = crate::arg_parse::digest)]
        expect: Option<String>,
        /// The image store (default: PREFIX/store).
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Check an installed prefix again: every file against the kit's manifest and every
    /// image blob in the store.
    Verify {
        /// The prefix `install` created.
        #[arg(long, value_name = "DIR")]
        prefix: PathBuf,
        /// The image store (default: what the install wrote into PREFIX/etc/arena.env).
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
        #[command(flatten)]
        out: JsonFlag,
    },
}
