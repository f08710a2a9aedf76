//! Each locked image of a run imported once. Task runs that want the same image —
//! two GPUs' first task runs both need the multi-gigabyte base — wait for one import instead
//! of unpacking it side by side, and the queue has an image in before a task run takes a GPU
//! ([`RunContext::images_ready`], the scheduler's `ready`): no GPU is held while an image is
//! imported, and the next task run's image is imported while the GPUs work.
//!
//! Only a success is kept: an import that failed is tried again by the next task run that
//! wants it, which reports the failure as its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arena_image::{ImageRecord, Store};
use arena_runtime::{ContainerRuntime, ImageRef, RuntimeError};
use tokio::sync::OnceCell;

use super::{Pipeline, RunContext};
use arena_run::Item;

/// Per manifest digest, the run's one import of that image.
#[derive(Default)]
pub struct ImportOnce {
    cells: Mutex<HashMap<String, Arc<OnceCell<ImageRef>>>>,
}

impl ImportOnce {
    /// The image imported into the engine, once per run: the first caller imports it and
    /// later ones (or ones that came meanwhile) wait for that import. `.1` says whether this
    /// call imported it.
    async fn once(
        &self,
        rt: &dyn ContainerRuntime,
        store: &Store,
        rec: &ImageRecord,
    ) -> Result<(ImageRef, bool), RuntimeError> {
        let cell = self
            .cells
            .lock()
            .unwrap()
            .entry(rec.manifest.to_string())
            .or_default()
            .clone();
        let mut imported_here = false;
        let image = cell
            .get_or_try_init(|| {
                imported_here = true;
                rt.ensure_image(store, rec)
            })
            .await?
            .clone();
        Ok((image, imported_here))
    }

    /// Imports the image unless this run already has.
    pub async fn import(
        &self,
        rt: &dyn ContainerRuntime,
        store: &Store,
        rec: &ImageRecord,
    ) -> Result<(), RuntimeError> {
        self.once(rt, store, rec).await.map(|_| ())
    }

    /// The image in the engine with the locked digest, for a task run. Where this run
    /// imported it before, the engine still checks the digest, as every task run's did
    /// before there was a run-wide import: a name in containerd can be retagged meanwhile.
    pub async fn ensure(
        &self,
        rt: &dyn ContainerRuntime,
        store: &Store,
        rec: &ImageRecord,
    ) -> Result<ImageRef, RuntimeError> {
        match self.once(rt, store, rec).await? {
            (image, true) => Ok(image),
            (_, false) => rt.ensure_image(store, rec).await,
        }
    }
}

impl RunContext {
    /// Has the images a task run of `item` in `pipeline` runs in imported (the task's, and
    /// a locked agent image where the pipeline runs the agent), for the scheduler to await
    /// before the item takes a GPU. A failure is only logged: the task run meets it again
    /// and reports it as its own.
    pub async fn images_ready(&self, item: &Item, pipeline: Pipeline) {
        // The task run's own lookups: one that fails here fails there too, and is reported.
        let mut wanted: Vec<&ImageRecord> =
            self.record_of(&item.task_id).ok().into_iter().collect();
        if pipeline == Pipeline::Full {
            wanted.extend(self.agent_record().ok().flatten());
        }
        for rec in wanted {
            if let Err(e) = self
                .imports
                .import(self.rt.as_ref(), &self.store, rec)
                .await
            {
                tracing::warn!(task = %item.label(), image = %rec.name, "importing ahead of the task run: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Fixture;

    fn imports(f: &Fixture) -> usize {
        f.fake
            .calls()
            .iter()
            .filter(|c| c.starts_with("ensure_image "))
            .count()
    }

    #[tokio::test]
    async fn an_image_is_imported_once_and_checked_by_each_later_caller() {
        let f = Fixture::new();
        let store = Store::open(&f.root().join("store")).unwrap();
        let lock = arena_image::Lockfile::load(&f.lock_path).unwrap();
        let rec = &lock.images[0];
        let once = ImportOnce::default();
        // A failed import is not kept: the next caller imports again.
        f.fake.fail_next("ensure_image", &rec.name, "registry gone");
        assert!(once.import(&f.fake, &store, rec).await.is_err());
        assert_eq!(imports(&f), 1);
        once.import(&f.fake, &store, rec).await.unwrap();
        once.import(&f.fake, &store, rec).await.unwrap();
        assert_eq!(imports(&f), 2, "imported once it had succeeded");
        // A task run's own call still has the engine check the digest.
        once.ensure(&f.fake, &store, rec).await.unwrap();
        assert_eq!(imports(&f), 3);
        // Another image has a cell of its own.
        once.import(&f.fake, &store, &lock.images[1]).await.unwrap();
        assert_eq!(imports(&f), 4);
    }
}
