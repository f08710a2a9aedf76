//! Property tests of agent files: an agent file is outside input (a lab writes it,
//! `arenactl run --agent FILE` reads it), so any text, and any edit of a shipped one, must be
//! read or refused with an error that names the file, never a panic; an agent that is read
//! has a command, a timeout and mounts at places arena allows. Inputs that once failed are
//! kept beside this file (`.proptest-regressions`) and run first.

use std::path::{Path, PathBuf};

use arena_mutate::{noise, one_edited, Format};
use arena_run::Agent;
use proptest::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Agent files of each kind: a CLI agent (placeholders, environment), scripted ones, one
/// with a mount, one for the GPU.
const FILES: &[&str] = &[
    "agents/claude-code.toml",
    "agents/codex.toml",
    "ci/agents/noop.toml",
    "ci/agents/optimize.toml",
    "ci/agents/adversary/timer.toml",
    "ci/gpu/agents/sync_noop.toml",
];

fn an_edited_agent() -> impl Strategy<Value = (usize, Vec<u8>)> {
    let texts = FILES
        .iter()
        .map(|f| std::fs::read_to_string(repo().join(f)).unwrap());
    one_edited(texts.collect(), Format::Toml)
}

fn check(path: &Path) -> Result<(), TestCaseError> {
    match Agent::load(path) {
        Err(e) => prop_assert!(e.to_string().contains(&path.display().to_string()), "{e}"),
        Ok(a) => {
            prop_assert!(!a.command.is_empty());
            prop_assert!(a.timeout_s >= 1);
            for m in &a.mounts {
                prop_assert!(
                    arena_run::agent::check_destination(&m.container).is_ok(),
                    "{}",
                    m.container
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn an_edited_agent_file_is_read_or_refused_naming_the_file((i, bytes) in an_edited_agent()) {
        // Beside the original, so that a mount's relative host path means what it meant.
        let dir = repo().join(FILES[i]).parent().unwrap().to_path_buf();
        let f = tempfile::Builder::new().prefix(".prop-").suffix(".toml").tempfile_in(&dir).unwrap();
        std::fs::write(f.path(), &bytes).unwrap();
        check(f.path())?;
    }

    #[test]
    fn any_text_is_refused_naming_the_file(text in noise()) {
        let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        std::fs::write(f.path(), &text).unwrap();
        check(f.path())?;
    }
}
