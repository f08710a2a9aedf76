//! The baseline phase: the untouched sources evaluated with the same commands, in the same
//! kind of container, as the agent's kernel will be.

use arena_eval::record::Evaluation;
use arena_proto::v1::EventKind;

use super::evaluator::Phase;
use super::phase::ContainerPhase;
use super::TaskRun;
use crate::error::Result;

impl TaskRun<'_> {
    pub(crate) async fn baseline(&self) -> Result<Phase> {
        self.evaluate_kernels(ContainerPhase::Baseline, None, EventKind::BaselineGate)
            .await
    }
}

/// Why a baseline evaluation cannot be scored against: a gate failed, or a case was not
/// measured (a zero or negative time is no baseline).
pub(crate) fn unusable(e: &Evaluation) -> Option<String> {
    if let Some(failed) = e.failed_gate() {
        return Some(failed);
    }
    if e.performance.is_empty() {
        return Some("performance: no cases measured".into());
    }
    e.performance.iter().find(|c| !c.measured()).map(|c| {
        format!(
            "performance: case {} measured {} ms",
            c.test_case_id, c.execution_time_ms
        )
    })
}
