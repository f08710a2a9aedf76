//! An image the engine holds, as a container needs it: its name, its manifest digest, and the
//! chain id of its top layer (the parent of a container's root snapshot).

use arena_image::{Digest, ImageRecord};

use crate::chain::chain_ids;
use crate::error::{Result, RuntimeError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    pub name: String,
    pub manifest: Digest,
    /// Chain id of the top layer: the parent snapshot of a container's root.
    pub top_chain_id: Digest,
}

impl ImageRef {
    /// The reference of a locked image; an image without layers has no root to run on and
    /// is refused, naming it.
    pub fn from_record(rec: &ImageRecord) -> Result<ImageRef> {
        let diff_ids: Vec<Digest> = rec.layers.iter().map(|l| l.diff_id.clone()).collect();
        let top_chain_id = chain_ids(&diff_ids).pop().ok_or_else(|| {
            RuntimeError::invalid(
                format!("image {} ({})", rec.name, rec.manifest),
                "has no layers: there is no root filesystem to run a container on",
            )
        })?;
        Ok(ImageRef {
            name: rec.name.clone(),
            manifest: rec.manifest.clone(),
            top_chain_id,
        })
    }
}
