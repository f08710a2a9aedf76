//! Every agent file the repository ships (agents/, ci/agents/, ci/gpu/agents/) loads as
//! `arenactl run --agent FILE` would load it: a file that does not parse would be found only by
//! the run that needs it, which on a GPU machine costs that machine's time.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn agent_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            agent_files(&p, found);
        } else if p.extension().is_some_and(|e| e == "toml")
            // parser_properties.rs writes its edited copies beside the originals as dotfiles.
            && !p.file_name().unwrap().to_string_lossy().starts_with('.')
        {
            found.push(p);
        }
    }
}

#[test]
fn every_shipped_agent_file_loads() {
    let mut files = Vec::new();
    for dir in ["agents", "ci/agents", "ci/gpu/agents"] {
        agent_files(&repo().join(dir), &mut files);
    }
    files.sort();
    // The three trees hold this many today: a directory that moves makes this fail loudly
    // rather than check nothing.
    assert!(files.len() >= 30, "found only {files:?}");
    // seccomp.toml and zombie.toml mount a probe that crates/arenactl/tests/suite/adversaries.rs
    // builds (ci/fixtures/seccomp-probe.c) before it runs them: absent until then.
    let built_by_tests = repo().join("ci/agents/adversary/probe");
    let failed: Vec<String> = files
        .iter()
        .filter_map(|f| {
            arena_run::Agent::load(f)
                .err()
                .map(|e| format!("{}: {e}", f.display()))
        })
        .filter(|e| !e.contains(&format!("{}: No such file", built_by_tests.display())))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let sync = arena_run::Agent::load(&repo().join("ci/gpu/agents/sync_noop.toml")).unwrap();
    assert_eq!(sync.name, "gpu-sync-noop");
}
