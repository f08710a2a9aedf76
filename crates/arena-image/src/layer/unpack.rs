//! An image's layers unpacked into a scratch directory, for the layers computed from them
//! (bytecode compiled by the image's own interpreter, a build command's root).

use std::path::Path;

use crate::error::{ImageError, Result};
use crate::record::LayerRecord;
use crate::store::Store;

/// Unpacks `layers` (bottom first) from the store into `root`. They are the store's own
/// verified blobs; whiteouts are applied by removing what they name.
pub fn unpack_layers(store: &Store, layers: &[LayerRecord], root: &Path) -> Result<()> {
    for l in layers {
        let path = store.blob_path(&l.digest);
        let f = std::fs::File::open(&path).map_err(|e| ImageError::io(&path, e))?;
        let r = crate::compress::decompressing_reader(std::io::BufReader::new(f))
            .map_err(|e| ImageError::io(&path, e))?;
        let mut ar = tar::Archive::new(r);
        ar.set_preserve_permissions(true);
        ar.set_overwrite(true);
        for entry in ar.entries().map_err(|e| ImageError::io(&path, e))? {
            let mut entry = entry.map_err(|e| ImageError::io(&path, e))?;
            let name = entry
                .path()
                .map_err(|e| ImageError::io(&path, e))?
                .into_owned();
            if let Some(file) = name.file_name().and_then(|n| n.to_str()) {
                if let Some(gone) = file.strip_prefix(".wh.") {
                    let target = root.join(name.with_file_name(gone));
                    let _ =
                        std::fs::remove_dir_all(&target).or_else(|_| std::fs::remove_file(&target));
                    continue;
                }
            }
            // `unpack_in` refuses entries that would land outside `root`.
            entry
                .unpack_in(root)
                .map_err(|e| ImageError::io(root.join(&name), e))?;
        }
    }
    Ok(())
}
