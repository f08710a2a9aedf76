//! Property tests of gRPC requests: a runner serves every client of its socket or
//! token file, so any SubmitRun request, with fields a client chose (paths, selectors, agent
//! names, numbers), must start a run or be refused with a status whose message names what
//! was wrong; never a panic, and never work or memory in proportion to a number the client
//! sent (writing it found two gaps: `runs` had no bound, and 4 billion repeats would have been
//! listed in memory; a path the runner could not look at was an internal error that named no
//! field). Run directories stay below the fixture's root, or are refused as relative.

use arena_mutate::noise;
use arena_proto::v1::runner_server::Runner;
use arena_proto::v1::SubmitRunRequest;
use proptest::prelude::*;
use tonic::{Code, Request};

use crate::auth::Caller;
use crate::service::RunnerService;
use crate::testing::Fixture;

/// What a refusal may name: a field of the request (or its flag), or a file one named.
const FIELDS: &[&str] = &[
    "image_lock",
    "tasks",
    "agent",
    "runs",
    "run_dir",
    "hidden_set",
    "memory",
    "perf_pairs",
    "trusted_pairs",
    "checked_calls",
    "secrets",
    "probe",
    ".lock",
    "config.yaml",
];

/// Fields a client may send: mostly nonsense, sometimes what the fixture has (the first of
/// the three: whether the fixture's lockfile goes in), so that each check is reached with the
/// others passing.
fn a_request() -> impl Strategy<Value = (bool, SubmitRunRequest, String)> {
    (
        prop_oneof![3 => Just(None), 1 => noise().prop_map(Some)],
        proptest::collection::vec(
            prop_oneof![
                4 => Just("python2python/t/alpha".to_string()),
                1 => Just("*".to_string()),
                2 => noise()
            ],
            0..3,
        ),
        prop_oneof![3 => Just("ok".to_string()), 1 => noise()],
        prop_oneof![3 => 0u32..3, 1 => any::<u32>()],
        proptest::bool::weighted(0.9),
        prop_oneof![3 => Just(String::new()), 1 => noise()],
        prop_oneof![3 => Just(0u64), 1 => any::<u64>()],
        proptest::option::of(prop_oneof![3 => 0u32..8, 1 => any::<u32>()]),
        proptest::bool::weighted(0.2),
        "[a-z]{1,8}",
        // Trusted pairs and checked calls, in one element (a tuple strategy has at most 12).
        (
            proptest::option::of(prop_oneof![3 => 0u32..8, 1 => any::<u32>()]),
            proptest::option::of(prop_oneof![3 => 0u32..70, 1 => any::<u32>()]),
        ),
        prop_oneof![
            3 => Just(std::collections::HashMap::new()),
            1 => proptest::collection::hash_map(prop_oneof!["[A-Z_]{1,6}", noise()], noise(), 1..3)
        ],
    )
        .prop_map(
            |(
                lock,
                tasks,
                agent,
                runs,
                below,
                hidden,
                memory,
                pairs,
                probe,
                name,
                (trusted, checked),
                secrets,
            )| {
                let req = SubmitRunRequest {
                    image_lock: lock.clone().unwrap_or_default(),
                    tasks,
                    agent,
                    runs,
                    run_dir: if below {
                        name.clone()
                    } else {
                        format!("relative/{name}")
                    },
                    hidden_set: hidden,
                    memory_bytes: memory,
                    probe_unseen: probe,
                    perf_pairs: pairs,
                    trusted_pairs: trusted,
                    checked_calls: checked,
                    secrets,
                };
                (lock.is_none(), req, name)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_submitted_run_starts_or_is_refused_naming_what_was_wrong((lock, mut req, name) in a_request()) {
        let f = Fixture::new();
        f.agent("ok", "exit:0", "");
        if lock {
            req.image_lock = f.lock_path.display().to_string();
        }
        if !req.run_dir.starts_with("relative/") {
            req.run_dir = f.root().join("runs").join(&name).display().to_string();
        }
        let rt = tokio::runtime::Runtime::new().unwrap();
        let service = RunnerService::new(f.engine.clone());
        let mut request = Request::new(req.clone());
        // A local caller that owns the fixture (not an admin: its paths are checked, and a
        // relative one is refused before anything is written).
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(f.root()).unwrap());
        request.extensions_mut().insert(Caller(format!("uid:{uid}")));
        let answer = rt.block_on(service.submit_run(request));
        match answer {
            Ok(r) => {
                let r = r.into_inner();
                prop_assert!(!r.run_id.is_empty());
                prop_assert!(req.runs <= arena_run::plan::MAX_RUNS, "{} runs started", req.runs);
                prop_assert!(
                    req.checked_calls.is_none_or(|n| n <= arena_run::plan::MAX_CHECKED_CALLS),
                    "started with {:?} checked calls", req.checked_calls
                );
            }
            Err(s) => {
                prop_assert!(
                    matches!(s.code(), Code::InvalidArgument | Code::NotFound | Code::PermissionDenied | Code::FailedPrecondition | Code::AlreadyExists),
                    "{:?}: {}", s.code(), s.message()
                );
                // The request's own field, or the file a field named (its lockfile, a task's
                // config), is what the message names.
                let m = s.message();
                prop_assert!(
                    FIELDS.iter().any(|f| m.contains(f)),
                    "{:?} names no field: {}", s.code(), m
                );
            }
        }
    }
}
