//! The image phase: the task run's task and its locked image, in the engine with the locked
//! digest (imported from the store if missing), the image's configured environment, and the
//! image the agent runs in.

use arena_image::{ImageRecord, Store};
use arena_proto::v1::EventKind;
use arena_run::events::Detail;
use arena_run::{AgentImage, Item};
use arena_runtime::ImageRef;
use arena_task::Task;

use super::RunContext;
use crate::error::{Result, RunnerError};
use crate::gpus::Gpu;

/// The image's configured environment (`config.Env`), from its config blob in the store.
pub fn image_env(store: &Store, rec: &ImageRecord) -> Result<Vec<String>> {
    let bytes = store.read_blob(&rec.config)?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| RunnerError::invalid(&rec.name, "config", e.to_string()))?;
    Ok(v.pointer("/config/Env")
        .and_then(|e| e.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default())
}

impl RunContext {
    pub(super) fn record_of(&self, task_id: &str) -> Result<&ImageRecord> {
        self.lock.task_image(task_id).ok_or_else(|| {
            RunnerError::invalid(
                &self.record.image_lock,
                "image",
                format!("no image for task {task_id}"),
            )
        })
    }

    /// A task run's task, its locked image (in the engine, imported if missing) and the
    /// image's environment.
    pub(super) async fn task_image(
        &self,
        item: &Item,
        gpu: &Gpu,
    ) -> Result<(&Task, &ImageRecord, ImageRef, Vec<String>)> {
        let task = self
            .tasks
            .get(&item.task_id)
            .ok_or_else(|| RunnerError::Other(format!("{}: task not loaded", item.task_id)))?;
        let rec = self.record_of(&task.id)?;
        let image = self
            .imports
            .ensure(self.rt.as_ref(), &self.store, rec)
            .await
            .map_err(|e| self.runtime_err(item, e))?;
        let env = image_env(&self.store, rec)?;
        self.events.emit(
            EventKind::ImageVerified,
            Some(item),
            Detail {
                gpu: Some(gpu.index),
                message: image.manifest.to_string(),
                passed: true,
                ..Default::default()
            },
        );
        Ok((task, rec, image, env))
    }

    /// The locked image the agent file names (`image = "lock:NAME"`); None where the agent
    /// runs in the task's own image.
    pub(super) fn agent_record(&self) -> Result<Option<&ImageRecord>> {
        let AgentImage::Locked(name) = &self.agent.image else {
            return Ok(None);
        };
        let r = self.lock.images.iter().find(|r| &r.name == name);
        r.map(Some).ok_or_else(|| {
            RunnerError::invalid(
                self.agent.file.display(),
                "image",
                format!("lock:{name} is not in the lockfile"),
            )
        })
    }

    /// The image the agent runs in: the task's own, or another locked image, with its
    /// environment.
    pub(super) async fn agent_image(&self, item: &Item) -> Result<Option<(ImageRef, Vec<String>)>> {
        let Some(r) = self.agent_record()? else {
            return Ok(None);
        };
        let img = self
            .imports
            .ensure(self.rt.as_ref(), &self.store, r)
            .await
            .map_err(|e| self.runtime_err(item, e))?;
        Ok(Some((img, image_env(&self.store, r)?)))
    }
}
