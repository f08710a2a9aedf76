//! The settings every arenactl command shares, run as a user runs them: -v/-q, the config
//! file, `arenactl env` and shell completions.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::cli::*;
use common::repo;

#[test]
fn verbose_and_quiet_set_the_log_level_and_arena_log_wins() {
    let r = repo();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("config.toml");
    std::fs::write(&cfg, "").unwrap();
    let c = cfg.to_str().unwrap();
    let debug = |o: &Output| stderr(o).contains("reading the configuration file");
    let o = clean(&["env"], &r, &[("ARENA_CONFIG", c)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!debug(&o), "{}", stderr(&o));
    assert!(debug(&clean(&["-vv", "env"], &r, &[("ARENA_CONFIG", c)])));
    assert!(debug(&clean(
        &["env", "--verbose", "--verbose"],
        &r,
        &[("ARENA_CONFIG", c)]
    )));
    assert!(!debug(&clean(&["-v", "env"], &r, &[("ARENA_CONFIG", c)])));
    let o = clean(
        &["-vv", "env"],
        &r,
        &[("ARENA_CONFIG", c), ("ARENA_LOG", "error")],
    );
    assert!(!debug(&o), "ARENA_LOG wins: {}", stderr(&o));
    let o = clean(
        &["-q", "env"],
        &r,
        &[("ARENA_CONFIG", c), ("ARENA_LOG", "debug")],
    );
    assert!(debug(&o), "ARENA_LOG wins over -q too: {}", stderr(&o));
}

#[test]
fn the_config_file_gives_defaults_that_flags_override_and_refuses_unknown_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let cfg = t.join("config.toml");
    let c = cfg.to_str().unwrap();
    let sock = format!("unix:{}/configured.sock", t.display());
    std::fs::write(&cfg, format!("runner = \"{sock}\"\nstore = \"store\"\n")).unwrap();
    let o = clean(&["runner", "gpus"], t, &[("ARENA_CONFIG", c)]);
    assert!(
        stderr(&o).contains(&sock),
        "the configured runner: {}",
        stderr(&o)
    );
    let flag = format!("unix:{}/flag.sock", t.display());
    let o = clean(
        &["runner", "gpus", "--runner", &flag],
        t,
        &[("ARENA_CONFIG", c)],
    );
    assert!(
        stderr(&o).contains(&flag) && !stderr(&o).contains(&sock),
        "the flag wins: {}",
        stderr(&o)
    );
    // `store`, relative to the file: image ls opens it there.
    let o = clean(&["image", "ls", "--json"], t, &[("ARENA_CONFIG", c)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["store"], t.join("store").to_str().unwrap());
    assert!(t.join("store/oci-layout").is_file());
    let o = clean(&["env", "--json"], t, &[("ARENA_CONFIG", c)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["config"]["runner"], sock.as_str());

    std::fs::write(&cfg, "store = \"/s\"\nrunnr = \"unix:/x\"\n").unwrap();
    for args in [&["env"][..], &["runner", "gpus"][..]] {
        let o = clean(args, t, &[("ARENA_CONFIG", c)]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(
            e.contains(&format!("{c}: line 2: unknown field `runnr`")),
            "file, line and key named: {e}"
        );
    }
    // A command that reads none of its keys is not stopped by it.
    let o = clean(&["task", "list", "tasks"], &repo(), &[("ARENA_CONFIG", c)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = clean(&["env"], t, &[("ARENA_CONFIG", "/nonexistent/config.toml")]);
    assert!(
        o.status.code() == Some(1) && stderr(&o).contains("named by ARENA_CONFIG"),
        "{}",
        stderr(&o)
    );
}

/// Every ARENA_* name in the Rust sources below `dir` (tests left out).
fn variables_in(dir: &Path, out: &mut std::collections::BTreeSet<String>) {
    for f in common::files_below(dir) {
        let path = f.to_string_lossy();
        if !path.ends_with(".rs") || path.contains("/tests/") || path.contains("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("ARENA_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            rest = &rest[i + name.len()..];
            // `ARENA_*`, `ARENA_GPU_*`: prefixes in prose, not variables.
            if !name.ends_with('_') {
                out.insert(name);
            }
        }
    }
}

#[test]
fn env_lists_every_variable_the_crates_read() {
    let mut names = std::collections::BTreeSet::new();
    for c in std::fs::read_dir(repo().join("crates")).unwrap() {
        variables_in(&c.unwrap().path().join("src"), &mut names);
    }
    // A constant's name, not a variable.
    names.remove("ARENA_KEYS");
    let o = clean(&["env"], &repo(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let listed = stdout(&o);
    let missing: Vec<_> = names
        .iter()
        .filter(|n| !listed.lines().any(|l| l.starts_with(&format!("{n} "))))
        .collect();
    assert!(
        missing.is_empty(),
        "not in `arenactl env`: {missing:?}\n{listed}"
    );
    assert!(listed.contains("ARENA_CONFIG") && listed.contains("config file:"));
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef arenactl"),
        ("fish", "complete -c arenactl"),
    ] {
        let o = clean(&["completions", shell], &repo(), &[]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
        let s = stdout(&o);
        assert!(s.contains(marker), "{shell}: {s}");
        for word in ["unseen", "materialize", "image-lock", "prune"] {
            assert!(s.contains(word), "{shell}: no {word}");
        }
    }
}
