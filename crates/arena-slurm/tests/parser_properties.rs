//! Property tests of what Slurm prints back to arena: `squeue`'s lines in
//! SQUEUE_FORMAT and the job names in them are outside input (any user's jobs are listed, and
//! job names are free text), so any text must parse without a panic into jobs whose fields
//! come from the line, and the lines arena's own jobs make must come back as they were. Inputs
//! that once failed are kept beside this file (`.proptest-regressions`) and run first.

use arena_mutate::noise;
use arena_run::rundir::Item;
use arena_slurm::commands::{parse_squeue, JobInfo, JobState, SQUEUE_FORMAT};
use arena_slurm::{job_name, parse_job_name};
use proptest::prelude::*;

/// States as squeue prints them, and some it may print that arena does not name.
const STATES: &[&str] = &[
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "SUSPENDED",
    "REQUEUED",
    "BOOT_FAIL",
];

/// One job as squeue lists it: an id (digits, an array's `_N`), a name of any text but a line
/// break (`|` included: only the id's and the last two fields' separators are arena's), a
/// state and a reason.
fn a_job() -> impl Strategy<Value = JobInfo> {
    (
        "[0-9]{1,9}(_[0-9]{1,4})?",
        "[^\n\r]{0,60}",
        proptest::sample::select(STATES),
        "[A-Za-z][A-Za-z0-9_,()]{0,30}",
    )
        .prop_map(|(id, name, state, reason)| JobInfo {
            id,
            name,
            state: JobState::parse(state),
            reason,
        })
}

fn line(j: &JobInfo) -> String {
    format!("{}|{}|{}|{}", j.id, j.name, j.state.as_str(), j.reason)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn squeue_lines_come_back_as_the_jobs_they_list(jobs in proptest::collection::vec(a_job(), 0..8)) {
        prop_assert_eq!(SQUEUE_FORMAT, "%i|%j|%T|%r");
        let text: String = jobs.iter().map(|j| line(j) + "\n").collect();
        prop_assert_eq!(parse_squeue(&text), jobs);
    }

    #[test]
    fn any_squeue_text_parses_without_a_panic_into_fields_of_its_lines(text in noise()) {
        for j in parse_squeue(&text) {
            prop_assert!(!j.id.contains('|'), "{:?}", j);
            prop_assert!(!j.reason.contains('|') && !j.state.as_str().contains('|'), "{:?}", j);
            prop_assert!(text.contains(&j.id) && text.contains(&j.name) && text.contains(&j.reason), "{:?}", j);
        }
    }

    #[test]
    fn arenas_job_names_come_back_and_others_are_not_arenas(
        run in "r[0-9a-f]{24}",
        task in "[a-z0-9_]{1,12}(/[a-z0-9_.]{1,12}){0,3}",
        repeat in 0u32..1000,
        other in noise(),
    ) {
        let item = Item { task_id: task.clone(), repeat };
        let name = job_name(&run, &item);
        let (r, back) = parse_job_name(&name).expect("arena's own job name");
        prop_assert_eq!(r, run);
        prop_assert_eq!(back.task_id, task);
        prop_assert_eq!(back.repeat, repeat);
        if let Some((r, it)) = parse_job_name(&other) {
            prop_assert!(other.starts_with("arena."), "{:?} taken for arena's ({}, {:?})", other, r, it);
        }
    }
}
