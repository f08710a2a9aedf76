//! The command tree's own conventions: every visible flag and argument says what it is, every
//! visible command says what it does and shows an example that parses, and plumbing is
//! hidden.

use super::examples::EXAMPLES;

/// Every visible command below `cmd`, with its path (`runner serve`), `cmd` included.
fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    out.push((path.to_string(), cmd.clone()));
    // clap's own `help` subcommand is clap's to describe.
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let p = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        walk(sub, &p, out);
    }
}

fn commands() -> Vec<(String, clap::Command)> {
    let mut cmd = super::command();
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, "", &mut out);
    out
}

#[test]
fn every_visible_flag_and_argument_has_a_description() {
    let mut blank = Vec::new();
    for (path, cmd) in commands() {
        for a in cmd.get_arguments() {
            let built_in = matches!(a.get_id().as_str(), "help" | "version");
            if a.is_hide_set() || built_in {
                continue;
            }
            let said = a.get_help().or(a.get_long_help()).map(|h| h.to_string());
            if said.is_none_or(|h| h.trim().is_empty()) {
                blank.push(format!("arenactl {path}: {}", a.get_id()));
            }
        }
    }
    assert!(blank.is_empty(), "no description:\n{}", blank.join("\n"));
}

#[test]
fn every_visible_command_says_what_it_does_and_shows_an_example() {
    let mut missing = Vec::new();
    for (path, cmd) in commands() {
        if cmd.get_about().is_none() {
            missing.push(format!("arenactl {path}: no about"));
        }
        let after = cmd
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        if !after.contains("Examples:\n  arenactl") {
            missing.push(format!("arenactl {path}: no Examples: block"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn every_example_names_a_command_and_parses() {
    let paths: Vec<String> = commands().into_iter().map(|(p, _)| p).collect();
    for (path, lines) in EXAMPLES {
        assert!(
            paths.iter().any(|p| p == path),
            "examples of `{path}`: no such command"
        );
        for line in lines.iter() {
            // Shell redirections, quotes and placeholders are for the reader.
            if line.contains(['>', '"', '…']) {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            super::command()
                .try_get_matches_from(&words)
                .unwrap_or_else(|e| panic!("`{line}`: {e}"));
        }
    }
}

#[test]
fn plumbing_is_hidden_but_still_parses() {
    let cmd = super::command();
    let runner = cmd.find_subcommand("runner").unwrap();
    assert!(runner.find_subcommand("exec").unwrap().is_hide_set());
    super::command()
        .try_get_matches_from([
            "arenactl",
            "runner",
            "exec",
            "--run-dir",
            "r",
            "--task",
            "t",
            "--repeat",
            "0",
            "--agent",
            "a",
        ])
        .unwrap();
}

#[test]
fn agent_flags_are_hidden_where_no_agent_runs_but_still_parse() {
    let mut cmd = super::command();
    cmd.build();
    let find = |path: &[&str]| {
        path.iter()
            .fold(cmd.clone(), |c, p| c.find_subcommand(p).unwrap().clone())
    };
    for (path, hidden) in [
        (&["run"][..], false),
        (&["eval"][..], true),
        (&["unseen", "generate"][..], true),
        (&["unseen", "eval"][..], true),
    ] {
        let sub = find(path);
        for id in super::AGENT_FLAGS {
            let a = sub
                .get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap_or_else(|| panic!("{path:?}: no {id}"));
            assert_eq!(a.is_hide_set(), hidden, "{path:?}: {id}");
        }
    }
    let parse = |words: &[&str]| super::command().try_get_matches_from(words);
    parse(&[
        "arenactl",
        "eval",
        "--image-lock",
        "l.lock",
        "--task",
        "t",
        "--candidate",
        "k.py",
        "--agents-dir",
        "a",
        "--allow-host-network",
    ])
    .unwrap();
    // unseen generate takes a runner only for its probe.
    let gen = [
        "arenactl", "unseen", "generate", "d", "--seed", "1", "-o", "h",
    ];
    parse(&gen).unwrap();
    let with_runner = [&gen[..], &["--runner", "unix:/r.sock"]].concat();
    assert!(parse(&with_runner).is_err());
    let probed = [&with_runner[..], &["--probe", "l.lock"]].concat();
    parse(&probed).unwrap();
}
