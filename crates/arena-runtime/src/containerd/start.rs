//! `start`: the created task's process begins.

use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::StartRequest;

use super::Containerd;
use crate::error::{call, Result};

pub(crate) async fn start(c: &Containerd, id: &str) -> Result<()> {
    let mut tc = TasksClient::new(c.channel());
    call(
        tc.start(c.req(
            StartRequest {
                container_id: id.to_string(),
                ..Default::default()
            },
            None,
        ))
        .await,
        "tasks.Start",
        id,
    )
    .map(|_| ())
}
