#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The same (task, repeat) appears twice: scoring it twice would bias every aggregate.
    #[error("task `{task_id}` run {repeat} appears more than once in the results")]
    Duplicate { task_id: String, repeat: u32 },
}
