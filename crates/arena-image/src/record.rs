//! What a build produced: the digests that a lockfile pins.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerRecord {
    pub digest: Digest,
    pub diff_id: Digest,
    pub size: u64,
    pub media_type: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    pub name: String,
    /// Hash of every input of the build (recipe, base, sources); names the build.
    pub derivation: Digest,
    /// `scratch`, or the base image's manifest digest.
    pub base: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_digest: Option<String>,
    pub layers: Vec<LayerRecord>,
    pub config: Digest,
    pub config_size: u64,
    pub manifest: Digest,
    pub manifest_size: u64,
}
