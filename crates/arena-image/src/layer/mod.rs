//! Layers: a tree of entries collected from sources (directories, files, tarballs, task
//! directories, Debian packages, Python wheels), written as a deterministic tar and compressed.
//!
//! Normalization: entries sorted by path bytes; every parent directory listed; mtime fixed
//! (the recipe's, default 0); uid/gid 0 unless the layer says otherwise; no atime, ctime,
//! xattrs or user/group names. Modes from the host filesystem are normalized (directories
//! 0755, files 0755 if any execute bit is set, else 0644) so the umask leaves no trace; modes
//! inside archives (tarballs, packages) are content and kept (permission bits only).

pub mod archive;
pub mod build_step;
pub mod bytecode;
pub mod deb;
pub mod installed;
pub mod sources;
pub mod tree;
pub mod unpack;
pub mod wheel;
pub mod write;

pub use tree::{Content, EntryKind, LayerEntry, LayerTree};
pub use write::{write_layer, BuiltLayer};
