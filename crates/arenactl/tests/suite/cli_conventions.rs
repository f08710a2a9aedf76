//! The conventions every arenactl command keeps, run as a user runs them and with no service
//! needed: inputs checked before containerd or a runner is contacted, connection errors that
//! name the OS's reason and the fix, usage errors that exit 2, help that describes every flag
//! and shows an example (the config file, -v/-q, `env` and completions: cli_config.rs).

use crate::common;

use std::process::Output;

use common::cli::*;
use common::repo;

/// A containerd socket that is not there: a command that got as far as containerd names it.
const NO_CONTAINERD: &str = "/nonexistent/containerd.sock";

/// Exit 1 with an error that names `what` and never got as far as a service.
fn refused_early(o: &Output, what: &[&str]) {
    no_panic(o);
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    for w in what {
        assert!(e.contains(w), "`{w}` not named: {e}");
    }
    assert!(
        !e.contains("containerd") && !e.contains("transport error"),
        "contacted a service first: {e}"
    );
}

#[test]
fn run_checks_its_inputs_before_containerd_or_a_runner() {
    let r = repo();
    let run = |extra: &[&str]| {
        let mut a = vec!["run", "--containerd", NO_CONTAINERD];
        a.extend_from_slice(extra);
        clean(&a, &r, &[])
    };
    let o = run(&["--image-lock", "/nonexistent.lock", "--agent", "nosuch"]);
    refused_early(&o, &["--image-lock /nonexistent.lock", "No such file"]);
    let lock = ["--image-lock", "lockfiles/cpu.lock"];
    let o = run(&[&lock[..], &["--agent", "nosuch"]].concat());
    refused_early(
        &o,
        &["--agent nosuch", "agents/nosuch.toml", "--agents-dir"],
    );
    let o = run(&[&lock[..], &["--agent", "agents/nosuch.toml"]].concat());
    refused_early(&o, &["--agent", "agents/nosuch.toml"]);
    let ok = ["--agent", "scripted"];
    let o = run(&[&lock[..], &ok[..], &["--tasks", "no/such/"]].concat());
    refused_early(&o, &["--tasks", "no/such/", "lockfiles/cpu.lock"]);
    let o = run(&[&lock[..], &ok[..], &["--unseen", "/nonexistent/set"]].concat());
    refused_early(&o, &["--unseen /nonexistent/set"]);
    let o = run(&[&lock[..], &ok[..], &["--out", "README.md/run"]].concat());
    refused_early(&o, &["--out README.md/run", "README.md is a file"]);
    let o = run(&[&lock[..], &ok[..], &["--secret", "KEY=/nonexistent/key"]].concat());
    refused_early(&o, &["--secret KEY=/nonexistent/key", "No such file"]);
    let o = run(&[
        &lock[..],
        &ok[..],
        &[
            "--runner",
            "http://127.0.0.1:9",
            "--token-file",
            "/nonexistent/t",
        ],
    ]
    .concat());
    refused_early(&o, &["--token-file /nonexistent/t"]);

    // Every input good: only then is containerd asked, and its absence named with the fix.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let o = run(&[&lock[..], &ok[..], &["--out", out.to_str().unwrap()]].concat());
    no_panic(&o);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains(&format!("cannot connect to containerd at {NO_CONTAINERD}"))
            && e.contains("No such file or directory")
            && e.contains("hint: is containerd running?")
            && e.contains("--containerd"),
        "{e}"
    );
}

#[test]
fn unseen_eval_and_eval_check_their_inputs_first() {
    let r = repo();
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let o = clean(
        &[
            "unseen",
            "eval",
            "/nonexistent/run",
            "--unseen",
            "/nonexistent/set",
        ],
        t,
        &[],
    );
    refused_early(&o, &["RUN_DIR /nonexistent/run", "No such file"]);
    std::fs::create_dir(t.join("notarun")).unwrap();
    let o = clean(&["unseen", "eval", "notarun", "--unseen", "set"], t, &[]);
    refused_early(&o, &["RUN_DIR notarun", "no run.json"]);
    std::fs::create_dir(t.join("run")).unwrap();
    std::fs::write(t.join("run/run.json"), "{}").unwrap();
    let o = clean(
        &["unseen", "eval", "run", "--unseen", "/nonexistent/set"],
        t,
        &[],
    );
    refused_early(&o, &["--unseen /nonexistent/set"]);
    std::fs::create_dir(t.join("set")).unwrap();
    let o = clean(&["unseen", "eval", "run", "--unseen", "set"], t, &[]);
    refused_early(&o, &["--unseen set", "manifest.json", "unseen generate"]);

    let eval = |extra: &[&str]| {
        let mut a = vec!["eval", "--containerd", NO_CONTAINERD];
        a.extend_from_slice(extra);
        clean(&a, &r, &[])
    };
    let o = eval(&[
        "--image-lock",
        "/nonexistent.lock",
        "--task",
        "t",
        "--candidate",
        "x.py",
    ]);
    refused_early(&o, &["--image-lock /nonexistent.lock"]);
    let o = eval(&[
        "--image-lock",
        "lockfiles/cpu.lock",
        "--task",
        "no/such",
        "--candidate",
        "x",
    ]);
    refused_early(&o, &["--task no/such", "lockfiles/cpu.lock"]);
    let task = ["--task", "python2python/arena/matmul"];
    let o = eval(
        &[
            &["--image-lock", "lockfiles/cpu.lock"][..],
            &task,
            &["--candidate", "/nonexistent.py"],
        ]
        .concat(),
    );
    refused_early(&o, &["--candidate /nonexistent.py"]);
}

#[test]
fn a_runner_that_is_not_there_is_named_with_the_os_reason_and_how_to_start_one() {
    let tmp = tempfile::tempdir().unwrap();
    let sock = format!("unix:{}/runner.sock", tmp.path().display());
    for args in [
        vec!["runner", "gpus", "--runner", &sock],
        vec!["runner", "status", "RUN", "--runner", &sock],
    ] {
        let o = clean(&args, tmp.path(), &[]);
        no_panic(&o);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(
            e.contains(&format!("connecting to the runner at {sock}"))
                && e.contains("No such file or directory (os error 2)")
                && e.contains("hint: is `arenactl runner serve` running?")
                && e.contains("unix:/run/arena/runner.sock"),
            "{e}"
        );
    }
    // TCP: a port nothing listens on (taken, then given back).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let token = tmp.path().join("token");
    std::fs::write(&token, "secret\n").unwrap();
    let addr = format!("http://127.0.0.1:{port}");
    let o = clean(
        &[
            "runner",
            "gpus",
            "--runner",
            &addr,
            "--token-file",
            token.to_str().unwrap(),
        ],
        tmp.path(),
        &[],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("Connection refused") && e.contains("hint: is `arenactl runner serve --listen"),
        "{e}"
    );
    // `run` with good inputs gets as far as the runner, and says the same.
    let o = clean(
        &[
            "run",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--agent",
            "agents/scripted.toml",
            "--runner",
            &sock,
        ],
        &repo(),
        &[],
    );
    let e = stderr(&o);
    assert!(
        e.contains("hint: is `arenactl runner serve` running?"),
        "{e}"
    );
}

#[test]
fn malformed_flag_values_are_usage_errors() {
    let r = repo();
    let run = ["run", "--image-lock", "x.lock", "--agent", "a"];
    for (extra, flag) in [
        (&["--gpus", "bogus"][..], "--gpus"),
        (&["--gpus", "nvidia:x"][..], "--gpus"),
        (&["--memory", "lots"][..], "--memory"),
        (&["--workspace-size", "0"][..], "--workspace-size"),
        (&["--runner", "gpu1:50551"][..], "--runner"),
        (&["--runs", "0"][..], "--runs"),
        (&["--cpus-per-gpu", "0"][..], "--cpus-per-gpu"),
        (&["--secret", "KEY"][..], "--secret"),
    ] {
        let o = clean(&[&run[..], extra].concat(), &r, &[]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {e}");
        assert!(
            e.contains("invalid value") && e.contains(flag),
            "{extra:?}: {e}"
        );
    }
    for args in [
        &["runner", "serve", "--listen", "nowhere"][..],
        &["runner", "serve", "--admin", "root"][..],
        &["runner", "serve", "--eval-idle", "-1"][..],
        &[
            "offline",
            "install",
            "k.tar",
            "--prefix",
            "p",
            "--expect",
            "sha256:abc",
        ][..],
        &[
            "unseen",
            "generate",
            "tasks",
            "--seed",
            "1",
            "-o",
            "o",
            "--per-task",
            "0",
        ][..],
        &["image", "pull", "r/x", "--registry-mirror", "docker.io"][..],
        &["-q", "-v", "task", "list", "tasks"][..],
        &["completions", "nosh"][..],
    ] {
        let o = clean(args, &r, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

/// The subcommands a help text lists under "Commands:".
fn subcommands(help: &str) -> Vec<String> {
    help.split("Commands:\n")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .take_while(|l| l.starts_with("  "))
                .filter_map(|l| l.split_whitespace().next())
                .filter(|c| *c != "help")
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_command_describes_each_flag_and_shows_an_example() {
    let r = repo();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    let mut seen = 0;
    let mut problems = Vec::new();
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("-h");
        let o = clean(&args, &r, &[]);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        let help = stdout(&o);
        seen += 1;
        let name = format!("arenactl {}", path.join(" "));
        if !help.contains("\nExamples:\n  arenactl") {
            problems.push(format!("{name}: no examples"));
        }
        // An option or argument line whose description is blank: its spec alone, neither
        // beside it nor (clap's layout for long specs) indented on the next line.
        let lines: Vec<&str> = help.lines().collect();
        let indent = |l: &str| l.len() - l.trim_start().len();
        let is_spec = |l: &str| {
            let t = l.trim_start();
            l.starts_with("  ") && (t.starts_with('-') || t.starts_with('<') || t.starts_with('['))
        };
        for (i, l) in lines.iter().enumerate() {
            let next = lines.get(i + 1).copied().unwrap_or("");
            let below = !next.trim().is_empty() && indent(next) > indent(l) && !is_spec(next);
            if is_spec(l) && !l.trim_start().contains("  ") && !below {
                problems.push(format!("{name}: `{}` has no description", l.trim()));
            }
        }
        for sub in subcommands(&help) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
    }
    assert!(seen > 40, "walked only {seen} commands");
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Plumbing is not offered; flags that do not apply are not listed.
    let runner = stdout(&clean(&["runner", "--help"], &r, &[]));
    assert!(!runner.contains("exec"), "{runner}");
    let eval = stdout(&clean(&["eval", "--help"], &r, &[]));
    assert!(
        !eval.contains("--agents-dir") && !eval.contains("--allow-host-network"),
        "{eval}"
    );
    let top = stdout(&clean(&["--help"], &r, &[]));
    assert!(
        top.contains("-v, --verbose") && top.contains("-q, --quiet"),
        "{top}"
    );
}
