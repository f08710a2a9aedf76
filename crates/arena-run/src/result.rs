//! The task result record (`result.json`, schema `arena.task_result/v2`): what one task run
//! produced — the baseline, the agent's kernel, both on unseen configurations — with the
//! trust level that measured it, every digest it depends on ([`Provenance`]), where its time
//! went ([`Timings`]) and its containers. Results written by an earlier arena
//! (`arena.task_result/v1`) are read for scoring, with no provenance; any other schema is
//! refused, naming it.

use std::collections::BTreeMap;

use arena_eval::record::Evaluation;
use arena_task::TaskId;
use serde::{Deserialize, Serialize};

mod provenance;
mod read;
pub use provenance::Provenance;
pub use read::{
    load_result_file, load_results, load_results_with_run, parse_result, LoadedResults,
};

pub const TASK_RESULT_SCHEMA: &str = "arena.task_result/v2";
pub const TASK_RESULT_SCHEMA_V1: &str = "arena.task_result/v1";
pub const RESULT_SET_SCHEMA: &str = "arena.results/v2";
pub const RESULT_SET_SCHEMA_V1: &str = "arena.results/v1";

/// How the numbers of a result were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// arena's trusted evaluator: inputs, reference, timing and verdict in a process the
    /// agent's code cannot reach; the kernel runs in a separate, unprivileged process.
    Trusted,
    /// The task's own harness, run unchanged on a read-only root, its reported times
    /// checked against a clock it cannot patch.
    SelfReportedCrossChecked,
    /// The task's own harness, its reported times taken as they are.
    SelfReported,
    /// Written by an arena that did not record how it measured (`arena.task_result/v1`).
    #[default]
    Unrecorded,
}

impl Trust {
    /// Whether the numbers came from the task's own harness, in the kernel's process.
    pub fn self_reported(self) -> bool {
        matches!(self, Trust::SelfReported | Trust::SelfReportedCrossChecked)
    }

    pub fn label(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::SelfReportedCrossChecked => "self-reported, cross-checked",
            Trust::SelfReported => "self-reported",
            Trust::Unrecorded => "unrecorded",
        }
    }
}

/// Seconds spent in each phase of a task run (absent: the phase did not run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    pub total_s: f64,
    /// When the task run began, in seconds since the Unix epoch (by the runner's clock): with
    /// `total_s` and the result's GPU, what a report needs to say how busy each GPU was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unseen_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<Breakdown>,
}

/// One container of a task run: how it ended, what it took, where its output is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerRecord {
    pub id: String,
    pub exit_code: u32,
    pub timed_out: bool,
    pub create_s: f64,
    pub start_s: f64,
    pub run_s: f64,
    pub teardown_s: f64,
    /// Log files, relative to the run directory; absent where the output is not kept
    /// (unseen evaluations: the kernel under test could print what it was given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    #[serde(default)]
    pub stdout_truncated: bool,
    #[serde(default)]
    pub stderr_truncated: bool,
}

/// One reading of the accelerator's state, taken on the host (`nvidia-smi`, amdgpu's sysfs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceReading {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sm_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pstate: Option<String>,
    /// What held the clocks down at that moment (`sw_power_cap`, `hw_thermal_slowdown`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowdowns: Vec<String>,
}

/// The accelerator around one evaluation: read before it, every few seconds while it ran,
/// and after. `warnings` say where its state could have moved the timings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceWindow {
    /// Where the readings come from (`nvidia-smi`, `amdgpu sysfs`).
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DeviceReading>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DeviceReading>,
    /// Readings taken, start and end included.
    pub samples: u32,
    /// The lowest and highest SM clock read while the device was busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_sm_clock_mhz: Option<(f64, f64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_temperature_c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_power_w: Option<f64>,
    /// Every reason the clocks were held down at some reading.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowdowns: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Why nothing could be read, where nothing could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// Where a task run's time went, phase by phase and by whose work it was: the harness's (or
/// arena's evaluator's) gates, the agent, and arena's own (images, containers, staging, the
/// gate runner's set-up, results).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Verifying (and, the first time, importing) the locked image.
    pub image_s: f64,
    /// Creating, starting and tearing down every container of the task run.
    pub containers_s: f64,
    /// The agent's container running.
    pub agent_s: f64,
    /// The gates' commands, over every evaluation (both kernels where paired).
    pub compile_s: f64,
    pub correctness_s: f64,
    pub performance_s: f64,
    /// arena's trusted evaluators outside their gates (their records' `phases_s`): the
    /// interpreter and its modules, the harness, the device's context, the zygote's imports,
    /// starting and closing kernel processes. A harness's own commands pay the like inside
    /// their gates (each starts its Python and PyTorch).
    #[serde(default)]
    pub evaluator_setup_s: f64,
    /// The trusted evaluators' performance gates (inside `performance_s`) by part, summed
    /// over their records' `performance_parts_s`: fresh sessions, sizing, warm-ups, inputs,
    /// captures, writing inputs, the timed windows, checks, the rest. Empty where the gates
    /// were a harness's own commands.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub performance_parts_s: BTreeMap<String, f64>,
    /// Seconds the trusted evaluators' timed batches read (inside the `window` part): of the
    /// performance gates, the kernels' own work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_measured_s: Option<f64>,
    /// Everything else: staging sources, each gate runner's set-up (task trees, the floor
    /// probe), cleaning between steps, reading reports, writing the result.
    pub other_s: f64,
    /// arena's own time (image + containers + evaluator set-up + other) over the task run's
    /// time less the agent's: what arena adds to evaluating a task.
    pub arena_share: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRecord {
    pub index: u32,
    pub kind: String,
}

impl GpuRecord {
    /// The kind of a CPU slot: a task run on it held no device.
    pub const CPU_SLOT: &'static str = "none";

    /// Whether the task run held a device (not a CPU slot).
    pub fn is_device(&self) -> bool {
        self.kind != Self::CPU_SLOT
    }
}

/// The original and the agent's kernel evaluated on the same hidden unseen configurations.
/// Configurations are named by index and category only: nothing here says what they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnseenResult {
    /// Digest of the sealed hidden set these configurations came from.
    pub set_digest: String,
    pub original: Evaluation,
    pub optimized: Evaluation,
    /// The agent's kernel: unseen configurations it fails, by category (edge_case,
    /// scale_up, …). Empty when it passes them all.
    #[serde(default)]
    pub failures_by_category: BTreeMap<String, u32>,
    /// The original kernel's failures on the same configurations, by category.
    #[serde(default)]
    pub original_failures_by_category: BTreeMap<String, u32>,
    /// Whether the original passes each configuration, by the set's index (empty in
    /// results written before configurations were judged one by one). Indices only: a
    /// result never says what a configuration is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub original_passed: Vec<bool>,
    /// Whether the agent's kernel passes each configuration, by the set's index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optimized_passed: Vec<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    pub schema: String,
    pub task_id: TaskId,
    pub task_type: String,
    /// Index of the repeated run (0 for the first).
    #[serde(default)]
    pub repeat: u32,
    #[serde(default)]
    pub trust: Trust,
    /// Why a self-reported result is not trusted (no trusted harness, and the construct of the
    /// task's runner that a derived one cannot follow); None for a trusted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_reason: Option<String>,
    /// The untouched sources, measured with the same commands in the same kind of container.
    pub baseline: Evaluation,
    /// The agent's sources.
    pub candidate: Evaluation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unseen: Option<UnseenResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRecord>,
    /// Every container of the task run, by phase (`baseline`, `agent`, `candidate`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub containers: BTreeMap<String, ContainerRecord>,
    /// Why the agent's sources never reached an evaluator (a symlink, a missing file…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_refused: Option<String>,
    /// A self-reported harness's times checked against arena's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_check: Option<arena_eval::cross_check::CrossCheck>,
    /// The trusted evaluator's record of each evaluation, by phase: its secret seed (told
    /// once no kernel ran any more), its warnings, its gate times.
    /// A phase whose evaluator wrote no record is absent (results before 2026-11-27 held null).
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "records_without_nulls"
    )]
    pub evaluators: BTreeMap<String, arena_eval::evaluator_record::EvaluatorRecord>,
    /// The accelerator's state during each evaluation, by phase (`baseline`, `candidate`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub device: BTreeMap<String, DeviceWindow>,
    /// A probe run's (`arenactl unseen generate --probe`): where the original ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeRun>,
    /// Fields this arena does not know (kept verbatim).
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl TaskResult {
    /// A result with only its evaluations; everything else empty.
    pub fn new(
        task_id: TaskId,
        task_type: &str,
        repeat: u32,
        baseline: Evaluation,
        candidate: Evaluation,
    ) -> TaskResult {
        TaskResult {
            schema: TASK_RESULT_SCHEMA.into(),
            task_id,
            task_type: task_type.to_string(),
            repeat,
            trust: Trust::Unrecorded,
            trust_reason: None,
            baseline,
            candidate,
            unseen: None,
            provenance: None,
            timings: None,
            gpu: None,
            containers: BTreeMap::new(),
            candidate_refused: None,
            cross_check: None,
            evaluators: BTreeMap::new(),
            device: BTreeMap::new(),
            probe: None,
            extra: BTreeMap::new(),
        }
    }
}

/// What a probe run's result says of where the original kernel ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeRun {
    /// The evaluator image's manifest digest.
    pub image: String,
}

/// A task run the arena could not carry out (the engine failed, a file could not be written,
/// an internal error): not a result, never scored; the next start of the run retries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InfraError {
    pub task_id: String,
    pub repeat: u32,
    pub reason: String,
    /// Seconds since the Unix epoch.
    pub at: u64,
}

/// What `results.json` holds: every task result of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultSet {
    pub schema: String,
    #[serde(default)]
    pub run_id: Option<String>,
    pub tasks: Vec<TaskResult>,
    /// Task runs without a result because of an infrastructure error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub infra_errors: Vec<InfraError>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// [`TaskResult::evaluators`], a null record (no record written) left out.
fn records_without_nulls<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, arena_eval::evaluator_record::EvaluatorRecord>, D::Error> {
    let all: BTreeMap<String, Option<arena_eval::evaluator_record::EvaluatorRecord>> =
        Deserialize::deserialize(d)?;
    Ok(all.into_iter().filter_map(|(k, v)| Some((k, v?))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal(schema: &str) -> serde_json::Value {
        let ok = serde_json::json!({"status": "ok", "error": null});
        serde_json::json!({
            "schema": schema, "task_id": "t/a/b", "task_type": "triton2triton",
            "baseline": {"compile": ok, "correctness": ok, "performance": []},
            "candidate": {"compile": ok, "correctness": ok, "performance": []},
            "digests": {"task": "sha256:x"},
        })
    }

    #[test]
    fn v1_results_are_read_with_their_fields_kept_and_no_trust() {
        let r = parse_result(minimal(TASK_RESULT_SCHEMA_V1)).unwrap();
        assert_eq!(r.trust, Trust::Unrecorded);
        assert!(r.provenance.is_none());
        assert!(r.extra.contains_key("digests"));
        assert_eq!(r.task_id.as_str(), "t/a/b");
    }

    #[test]
    fn unknown_schemas_and_bad_task_ids_are_refused() {
        let e = parse_result(minimal("arena.task_result/v9")).unwrap_err();
        assert!(e.contains("arena.task_result/v9"), "{e}");
        let mut v = minimal(TASK_RESULT_SCHEMA);
        v["task_id"] = "../etc".into();
        assert!(parse_result(v).is_err());
    }

    #[test]
    fn a_v2_result_round_trips() {
        let mut r = parse_result(minimal(TASK_RESULT_SCHEMA)).unwrap();
        r.trust = Trust::Trusted;
        r.timings = Some(Timings {
            total_s: 3.0,
            agent_s: Some(1.0),
            ..Default::default()
        });
        let back = parse_result(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            serde_json::to_value(Trust::SelfReportedCrossChecked).unwrap(),
            "self_reported_cross_checked"
        );
    }

    /// An evaluator's record is read by its typed fields and written back as it was; a null
    /// record (written before 2026-11-27 where an evaluator left none) is read as absent.
    #[test]
    fn evaluator_records_are_typed_and_a_null_one_is_absent() {
        let mut v = minimal(TASK_RESULT_SCHEMA);
        v["evaluators"] = serde_json::json!({
            "baseline": null,
            "candidate": {"seed": "ab", "gate_s": {"compile": 1.0}, "warnings": [], "plan": {"rounds": []}}
        });
        let r = parse_result(v.clone()).unwrap();
        assert_eq!(r.evaluators.len(), 1);
        let c = &r.evaluators["candidate"];
        assert_eq!(
            (c.seed.as_deref(), c.gate_s.as_ref().unwrap()["compile"]),
            (Some("ab"), 1.0)
        );
        let back = serde_json::to_value(&r).unwrap();
        assert_eq!(
            back["evaluators"],
            serde_json::json!({"candidate": v["evaluators"]["candidate"]})
        );
    }

    #[test]
    fn a_breakdown_written_before_the_evaluators_set_up_was_named_still_reads() {
        let mut v = minimal(TASK_RESULT_SCHEMA);
        v["timings"] = serde_json::json!({"total_s": 10.0, "breakdown": {
            "image_s": 0.1, "containers_s": 0.2, "agent_s": 1.0, "compile_s": 1.0,
            "correctness_s": 1.0, "performance_s": 5.0, "other_s": 1.7, "arena_share": 0.2}});
        let b = parse_result(v).unwrap().timings.unwrap().breakdown.unwrap();
        assert_eq!((b.evaluator_setup_s, b.other_s), (0.0, 1.7));
    }

    /// A result set's task runs without a result are read with it; a plain list has none,
    /// and a malformed entry is refused by its field.
    #[test]
    fn a_sets_task_runs_without_a_result_are_read_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let set = dir.path().join("results.json");
        std::fs::write(&set, r#"{"schema": "arena.results/v2", "tasks": [], "infra_errors": [{"task_id": "a", "repeat": 2, "reason": "gone", "at": 5}]}"#).unwrap();
        let got = load_result_file(&set).unwrap().infra_errors;
        assert_eq!(
            (
                got[0].task_id.as_str(),
                got[0].repeat,
                got[0].reason.as_str()
            ),
            ("a", 2, "gone")
        );
        let list = dir.path().join("list.json");
        std::fs::write(&list, "[]").unwrap();
        assert!(load_result_file(&list).unwrap().infra_errors.is_empty());
        std::fs::write(&set, r#"{"tasks": [], "infra_errors": [{"task_id": "a"}]}"#).unwrap();
        let e = load_result_file(&set).unwrap_err().to_string();
        assert!(
            e.contains("infra_errors") && e.contains("results.json"),
            "{e}"
        );
    }
}
