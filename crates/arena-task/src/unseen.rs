//! Hidden unseen configurations: generated per task from its visible shape declaration, across
//! the six categories of the AgentKernelArena paper, deterministic for a seed, each tagged with
//! its category, none equal to a visible shape, none over a device-memory budget.

use serde::{Deserialize, Serialize};

use crate::shapes::Value;
pub use entry::memory_estimate;
use entry::{flatten, form, rebuild};
use rules::leaf_names;
pub use rules::{Hints, Role, Rules};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    EdgeCase,
    ScaleUp,
    ScaleDown,
    AlignmentStress,
    Asymmetric,
    ProductionRealistic,
}

impl Category {
    /// The name used in sets and reports (`edge_case`, `scale_up`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Category::EdgeCase => "edge_case",
            Category::ScaleUp => "scale_up",
            Category::ScaleDown => "scale_down",
            Category::AlignmentStress => "alignment_stress",
            Category::Asymmetric => "asymmetric",
            Category::ProductionRealistic => "production_realistic",
        }
    }
}

pub const CATEGORIES: [Category; 6] = [
    Category::EdgeCase,
    Category::ScaleUp,
    Category::ScaleDown,
    Category::AlignmentStress,
    Category::Asymmetric,
    Category::ProductionRealistic,
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnseenConfig {
    pub category: Category,
    /// The entry as Python source, ready to go into the rewritten declaration.
    pub entry: String,
    /// Whether the original kernel passed this configuration in the task's evaluator image
    /// before the set was sealed (`unseen generate --probe`); absent where it was not probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_passed: Option<bool>,
    /// The equality an asymmetric configuration of a cube breaks (`M = N = K in every
    /// visible configuration`): whether the kernel needs it, no rule can tell, so a probe
    /// (`unseen generate --probe`) keeps the configuration only where the original passes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaks_tie: Option<String>,
}

#[derive(Debug, Clone, Copy)]
pub struct GenOptions {
    pub seed: u64,
    pub per_task: usize,
    /// Estimated device memory a config may need (bytes).
    pub memory_budget: u64,
    /// Work bound: the product of a config's dimensions may be at most this many times the
    /// largest visible product (a CPU harness runs out of patience long before of memory).
    pub max_scale: f64,
    /// The number of the first label (`unseenN`) the configurations get: a second round of
    /// generation for the same set starts past the first's, so no two labels are alike.
    pub first_label: usize,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            seed: 0,
            per_task: 8,
            memory_budget: 8 << 30,
            max_scale: 16.0,
            first_label: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    #[error("no visible shapes to start from")]
    Empty,
    #[error("entries differ in form (entry {index} is `{entry}`); cannot infer dimension roles")]
    Mixed { index: usize, entry: String },
    #[error("no problem dimensions in the visible shapes (every integer is a launch parameter, a flag or a weight size)")]
    NoDimensions,
}

/// splitmix64: a tiny, stable generator (same seed, same numbers, on every platform).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// Stable 64-bit hash of a string (FNV-1a), to give each task its own stream.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

const PRIMES: &[i64] = &[
    3, 7, 13, 37, 61, 97, 131, 257, 509, 1021, 2053, 4003, 8191, 16381, 32749,
];
/// Token counts of real workloads: decode batches, short and long prompts.
const TOKENS: &[i64] = &[1, 7, 24, 128, 384, 512, 1000, 2048, 4096];
const HIDDEN: &[i64] = &[2048, 2880, 4096, 5120, 7168, 8192];

/// Generates `per_task` configurations, cycling through the six categories. Visible entries
/// of several forms (a list of 1-D, 2-D and 4-D shapes) are generated form by form, the
/// configurations shared out among the forms in order and each form starting its categories
/// where the previous one left off, so that the set still covers all six.
pub fn generate(
    task_id: &str,
    visible: &[Value],
    opts: GenOptions,
) -> Result<Vec<UnseenConfig>, GenError> {
    generate_with(task_id, visible, &Hints::default(), opts)
}

/// [`generate`] with the names the code gives the entries' components ([`rules`]).
pub fn generate_with(
    task_id: &str,
    visible: &[Value],
    hints: &Hints,
    opts: GenOptions,
) -> Result<Vec<UnseenConfig>, GenError> {
    let groups = forms(visible);
    if groups.len() <= 1 {
        return generate_form(task_id, visible, hints, opts, 0);
    }
    let mut out = Vec::new();
    let mut offset = 0;
    for (k, g) in groups.iter().enumerate() {
        let share = opts.per_task / groups.len() + usize::from(k < opts.per_task % groups.len());
        if share == 0 {
            continue;
        }
        let sub = GenOptions {
            per_task: share,
            first_label: opts.first_label + offset,
            ..opts
        };
        let made = generate_form(&format!("{task_id}#{k}"), g, hints, sub, offset)?;
        offset += made.len();
        out.extend(made);
    }
    if out.is_empty() {
        return Err(GenError::NoDimensions);
    }
    Ok(out)
}

/// The visible entries grouped by form, in order of first appearance.
fn forms(visible: &[Value]) -> Vec<Vec<Value>> {
    let mut groups: Vec<Vec<Value>> = Vec::new();
    for v in visible {
        match groups.iter_mut().find(|g| form(&g[0]) == form(v)) {
            Some(g) => g.push(v.clone()),
            None => groups.push(vec![v.clone()]),
        }
    }
    groups
}

/// [`generate`] for entries of one form; `offset` rotates which category goes first.
fn generate_form(
    task_id: &str,
    visible: &[Value],
    hints: &Hints,
    opts: GenOptions,
    offset: usize,
) -> Result<Vec<UnseenConfig>, GenError> {
    let first = visible.first().ok_or(GenError::Empty)?;
    let shape = form(first);
    for (i, v) in visible.iter().enumerate() {
        if form(v) != shape {
            return Err(GenError::Mixed {
                index: i,
                entry: v.to_python(),
            });
        }
    }
    let flats: Vec<Vec<Value>> = visible.iter().map(flatten).collect();
    let rules = Rules::infer(&flats, &leaf_names(first, hints), hints);
    let Some(space) = categories::Space::new(&flats, &rules) else {
        return Err(GenError::NoDimensions);
    };
    // A cube's asymmetric configurations are made under its rules less the tie ([`rules`]).
    let tie = rules.tie();
    let untied = rules.untied();
    let loose = tie
        .as_ref()
        .and_then(|_| categories::Space::new(&flats, &untied));

    let work = |f: &[Value]| -> f64 {
        f.iter()
            .filter_map(|v| v.as_int())
            .map(|i| i.max(1) as f64)
            .product()
    };
    let max_work = flats.iter().map(|f| work(f)).fold(1.0, f64::max) * opts.max_scale;
    let mut rng = Rng(opts.seed ^ fnv(task_id));
    // Configurations compared without their labels: visible ones and those made so far.
    let unlabeled = |f: &[Value]| {
        let mut f = f.to_vec();
        for &l in &rules.labels {
            f[l] = Value::None;
        }
        rebuild(first, &mut f.iter()).to_python()
    };
    // Whether a candidate, once snapped, keeps the rules and budgets and is new.
    let acceptable = |f: &[Value], rules: &Rules, seen: &[String]| {
        memory_estimate(f) <= opts.memory_budget
            && work(f) <= max_work
            && rules.violations(f, &flats).is_empty()
            && !seen.contains(&unlabeled(f))
    };
    let mut seen: Vec<String> = flats.iter().map(|f| unlabeled(f)).collect();
    let mut out: Vec<UnseenConfig> = Vec::new();
    let mut attempts = 0;
    let (mut made, mut failed) = ([0usize; 6], [0usize; 6]);
    while out.len() < opts.per_task && attempts < opts.per_task * 64 {
        // The category with the fewest configurations so far (a failed attempt counts a
        // quarter), first in order on a tie: every category gets one before any gets two, and
        // one that cannot be made here gives way after four tries.
        let pick = (0..CATEGORIES.len())
            .min_by_key(|&i| {
                (
                    4 * made[i] + failed[i],
                    (i + CATEGORIES.len() - offset % CATEGORIES.len()) % CATEGORIES.len(),
                )
            })
            .expect("six categories");
        let category = CATEGORIES[pick];
        attempts += 1;
        let (made_in, kept, breaks_tie) = match &loose {
            Some(l) if category == Category::Asymmetric => (l, &untied, tie.clone()),
            _ => (&space, &rules, None),
        };
        let fits = |f: &[Value]| {
            let mut g = f.to_vec();
            kept.snap(&mut g);
            acceptable(&g, kept, &seen)
        };
        let mut f = made_in.make(category, &mut rng, &fits);
        kept.snap(&mut f);
        if !acceptable(&f, kept, &seen) {
            failed[pick] += 1;
            continue;
        }
        // Where the tie holds after all (the long dimension equals the others), the
        // configuration breaks nothing.
        let breaks_tie = breaks_tie.filter(|_| !rules.violations(&f, &flats).is_empty());
        seen.push(unlabeled(&f));
        // A label names the configuration by its place in the set, never a visible one's.
        for &l in &rules.labels {
            f[l] = Value::Str(format!("unseen{}", opts.first_label + out.len()));
        }
        let entry = rebuild(first, &mut f.iter()).to_python();
        made[pick] += 1;
        out.push(UnseenConfig {
            category,
            entry,
            original_passed: None,
            breaks_tie,
        });
    }
    Ok(out)
}

mod categories;
pub(crate) mod entry;
pub mod rules;
#[cfg(test)]
mod tests;

/// What a configuration breaks of the rules its visible configurations of the same form obey
/// ([`rules`]); empty when it keeps them all. A form no visible entry has is itself a
/// violation. An asymmetric configuration that says it breaks a cube's tie (`breaks_tie`) is
/// held to the rules less the tie, and only where the visible configurations are a cube.
pub fn violations(visible: &[Value], hints: &Hints, config: &UnseenConfig) -> Vec<String> {
    let entry = config.entry.as_str();
    let parsed = match crate::shapes::Parser::at(entry, 0, "entry").value() {
        Ok(v) => v,
        Err(e) => return vec![format!("`{entry}` cannot be read: {e}")],
    };
    let same: Vec<&Value> = visible
        .iter()
        .filter(|v| form(v) == form(&parsed))
        .collect();
    let Some(first) = same.first() else {
        return vec![format!("`{entry}` has a form no visible configuration has")];
    };
    let flats: Vec<Vec<Value>> = same.iter().map(|v| flatten(v)).collect();
    let rules = Rules::infer(&flats, &leaf_names(first, hints), hints);
    match &config.breaks_tie {
        None => rules.violations(&flatten(&parsed), &flats),
        Some(_) if config.category == Category::Asymmetric && rules.tied() => {
            rules.untied().violations(&flatten(&parsed), &flats)
        }
        Some(tie) => vec![format!(
            "says it breaks a tie ({tie}), which only an asymmetric configuration of a cube may"
        )],
    }
}
