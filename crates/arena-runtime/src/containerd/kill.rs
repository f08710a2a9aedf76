//! `kill`: a signal to every process of the container (`all`), not only its first one.

use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::KillRequest;

use super::Containerd;
use crate::error::{call, Result};

pub(crate) async fn kill(c: &Containerd, id: &str, signal: u32) -> Result<()> {
    let mut tc = TasksClient::new(c.channel());
    call(
        tc.kill(c.req(
            KillRequest {
                container_id: id.to_string(),
                signal,
                all: true,
                ..Default::default()
            },
            None,
        ))
        .await,
        "tasks.Kill",
        id,
    )
    .map(|_| ())
}
