//! arenactl's integration tests, one binary: each module is what was a test binary of its own
//! (linked once instead of 28 times). Most need root, containerd and runc; ci/test.sh runs
//! them under cargo-nextest, one process per test, and ci/nextest.toml says which go first.

mod common;

mod adversaries;
mod agent_cli;
mod aka_slice;
mod aka_tasks;
mod benchmark_locks;
mod class_entry;
mod cli_config;
mod cli_conventions;
mod crash_points;
mod derived_harnesses;
mod derived_refusal;
mod evaluate_api;
mod fork_chain;
mod image_store_cli;
mod images_build;
mod images_bundle;
mod images_lock;
mod kernelbench_cpu;
mod kernelbench_import;
mod network_e2e;
mod offline_kit;
mod registry_cli;
mod report_cli;
mod run_e2e;
mod runner_api;
mod simulated_tasks;
mod slurm_e2e;
mod split_files;
mod task_cli;
mod task_output;
mod unseen_e2e;
mod unseen_probe;
