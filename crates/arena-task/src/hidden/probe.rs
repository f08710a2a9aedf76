//! A set probed before it is sealed (`arenactl unseen generate --probe`): the original kernel
//! runs every candidate configuration in the task's evaluator image; what it fails is
//! dropped, more are made where too few pass, and the set keeps configurations it passed,
//! the categories taken in turn. What the probe ran on is recorded in the manifest.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::unseen::{Category, UnseenConfig, CATEGORIES};

/// What a sealed set records of its probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// sha256 of the lockfile whose images ran the original kernels.
    pub image_lock_digest: String,
    /// Rounds of generation and probing it took.
    pub rounds: u32,
    /// Every task that got configurations, sorted by id.
    pub tasks: Vec<ProbedTask>,
}

/// One task's probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbedTask {
    pub task_id: String,
    /// The evaluator image the original kernel ran in (its manifest digest).
    pub image: String,
    /// The accelerator it ran on (`nvidia`, `amd`, `cpu`…), as the runner leased it.
    pub device: String,
    /// Candidate configurations probed, and how many of them the original passed.
    pub probed: usize,
    pub passed: usize,
}

/// Up to `per_task` of the configurations the original passed, each marked so: the
/// categories taken in turn in the paper's order, within a category in the order they were
/// made, so the set covers every category a passing configuration has.
pub fn choose(probed: &[(UnseenConfig, bool)], per_task: usize) -> Vec<UnseenConfig> {
    let mut queues: Vec<Vec<&UnseenConfig>> = CATEGORIES
        .iter()
        .map(|cat| {
            probed
                .iter()
                .filter(|(c, ok)| *ok && c.category == *cat)
                .map(|(c, _)| c)
                .rev()
                .collect()
        })
        .collect();
    let mut out = Vec::new();
    while out.len() < per_task {
        let mut took = false;
        for q in queues.iter_mut() {
            if out.len() == per_task {
                break;
            }
            if let Some(c) = q.pop() {
                let mut c = c.clone();
                c.original_passed = Some(true);
                out.push(c);
                took = true;
            }
        }
        if !took {
            break;
        }
    }
    out
}

/// Whether what was probed leaves the task's set short: fewer passing configurations than
/// `per_task`, or a category that was made but never passed (while the set has room for it).
pub fn needs_more(probed: &[(UnseenConfig, bool)], per_task: usize) -> bool {
    let passing = probed.iter().filter(|(_, ok)| *ok).count();
    let made: BTreeSet<Category> = probed.iter().map(|(c, _)| c.category).collect();
    let passed: BTreeSet<Category> = probed
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(c, _)| c.category)
        .collect();
    passing < per_task || passed.len() < made.len().min(per_task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Category::*;

    fn cfg(category: Category, n: usize) -> UnseenConfig {
        UnseenConfig {
            category,
            entry: format!("({n},)"),
            original_passed: None,
            breaks_tie: None,
        }
    }

    #[test]
    fn choose_takes_only_passing_configurations_categories_in_turn() {
        let probed = vec![
            (cfg(EdgeCase, 1), true),
            (cfg(EdgeCase, 2), true),
            (cfg(EdgeCase, 3), true),
            (cfg(ScaleUp, 4), false),
            (cfg(ScaleUp, 5), true),
            (cfg(Asymmetric, 6), true),
            (cfg(ProductionRealistic, 7), false),
        ];
        let got = choose(&probed, 4);
        let entries: Vec<&str> = got.iter().map(|c| c.entry.as_str()).collect();
        assert_eq!(entries, ["(1,)", "(5,)", "(6,)", "(2,)"]);
        assert!(got.iter().all(|c| c.original_passed == Some(true)));
        // Room for more than pass: every passing one, no failing one.
        assert_eq!(choose(&probed, 10).len(), 5);
        assert!(choose(&probed[3..4], 3).is_empty());
    }

    #[test]
    fn more_are_needed_while_too_few_pass_or_a_made_category_never_did() {
        let ok = |c, n| (cfg(c, n), true);
        let full: Vec<_> = CATEGORIES
            .iter()
            .enumerate()
            .map(|(n, c)| ok(*c, n))
            .collect();
        assert!(!needs_more(&full, 6));
        assert!(needs_more(&full, 7));
        let mut one_fails = full.clone();
        one_fails[2].1 = false;
        one_fails.push(ok(EdgeCase, 9));
        // Six pass, but scale_down was made and never passed.
        assert!(needs_more(&one_fails, 6));
        // With room for two only, two categories are enough.
        assert!(!needs_more(&one_fails, 2));
        // A category never made is not asked for.
        assert!(!needs_more(&full[..3], 3));
    }
}
