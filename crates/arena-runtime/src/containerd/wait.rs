//! `wait`: blocks until the task's process exits, and gives its exit status.

use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::WaitRequest;

use super::Containerd;
use crate::error::{call, Result};

pub(crate) async fn wait(c: &Containerd, id: &str) -> Result<u32> {
    let mut tc = TasksClient::new(c.channel());
    call(
        tc.wait(c.req(
            WaitRequest {
                container_id: id.to_string(),
                ..Default::default()
            },
            None,
        ))
        .await,
        "tasks.Wait",
        id,
    )
    .map(|r| r.exit_status)
}
