//! Every digest a task result depends on, and the arena that wrote it.

use arena_digest::Digest;
use serde::{Deserialize, Serialize};

/// Every digest a result depends on: with these, anyone can check that the same inputs
/// were used, or rebuild them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The arena that produced the result.
    pub arena_version: String,
    pub run_id: String,
    /// The task tree (arena-task's canonical digest).
    pub task: Digest,
    /// The task's harness files (everything but the agent's declared sources).
    pub harness: Digest,
    /// The manifest of the task image the evaluators ran.
    pub image: Digest,
    /// The manifest of the image the agent ran in (absent where no agent ran: an evaluation
    /// of candidate files through the Evaluate API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_image: Option<Digest>,
    /// The agent file (absent where no agent ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Digest>,
    /// The candidate files an Evaluate request handed in, as evaluated (arena-runner's
    /// `evaluate::candidate::digest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<Digest>,
    /// The lockfile of the run.
    pub lockfile: Digest,
    /// arena's trusted evaluator code, where it measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<Digest>,
    /// The sealed hidden set of the unseen evaluation, where there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unseen_set: Option<Digest>,
}

impl Provenance {
    /// The digests every result has, by this arena; the rest (the agent and its image, an
    /// Evaluate request's candidate, the evaluator, the hidden set) are set where they apply.
    pub fn new(
        run_id: String,
        task: Digest,
        harness: Digest,
        image: Digest,
        lockfile: Digest,
    ) -> Self {
        Provenance {
            arena_version: env!("CARGO_PKG_VERSION").to_string(),
            run_id,
            task,
            harness,
            image,
            agent_image: None,
            agent: None,
            candidate: None,
            lockfile,
            evaluator: None,
            unseen_set: None,
        }
    }
}
