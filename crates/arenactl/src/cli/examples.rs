//! The examples each command's help ends with, in one table: a command's path (its
//! subcommand names after `arenactl`) and the lines to show. cli/tests.rs checks that every
//! visible command has one, and that each example parses.

/// (path, example command lines).
pub const EXAMPLES: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "arenactl task list tasks",
            "arenactl lock --set cpu",
            "arenactl run --image-lock lockfiles/cpu.lock --agent scripted --gpus cpu:2",
            "arenactl report runs/cpu-scripted",
        ],
    ),
    (
        "task",
        &["arenactl task list tasks", "arenactl task validate tasks"],
    ),
    (
        "task list",
        &[
            "arenactl task list tasks",
            "arenactl task list tasks/python2python --json",
        ],
    ),
    (
        "task show",
        &[
            "arenactl task show python2python/arena/matmul",
            "arenactl task show tasks/python2python/arena/matmul --json",
        ],
    ),
    (
        "task validate",
        &["arenactl task validate tasks", "arenactl task validate tasks --json"],
    ),
    (
        "task materialize",
        &["arenactl task materialize --aka-root ../AgentKernelArena \
           --harnesses tasks/aka-harnesses -o aka-tasks ../AgentKernelArena/tasks"],
    ),
    (
        "task import",
        &["arenactl task import kernelbench ../KernelBench -o kb-tasks"],
    ),
    ("task digest", &["arenactl task digest tasks/python2python"]),
    (
        "score",
        &[
            "arenactl score runs/cpu-scripted/results.json",
            "arenactl score a/results.json b/results.json --csv",
        ],
    ),
    (
        "report",
        &[
            "arenactl report runs/cpu-scripted",
            "arenactl report runs/cpu-scripted --format md",
            "arenactl report runs/cpu-scripted --json -o report.json",
        ],
    ),
    (
        "compare",
        &[
            "arenactl compare runs/cpu-scripted runs/cpu-claude",
            "arenactl compare runs/a runs/b --json",
        ],
    ),
    (
        "image",
        &[
            "arenactl image build images/testbase.toml",
            "arenactl image ls --image-lock lockfiles/cpu.lock",
        ],
    ),
    ("image build", &["arenactl image build images/testbase.toml"]),
    (
        "image load",
        &["arenactl image load --image-lock lockfiles/cpu.lock"],
    ),
    (
        "image verify",
        &["arenactl image verify --image-lock lockfiles/cpu.lock"],
    ),
    (
        "image resolve",
        &["arenactl image resolve docker.io/library/debian:bookworm"],
    ),
    (
        "image pull",
        &["arenactl image pull docker.io/library/debian:bookworm"],
    ),
    (
        "image push",
        &["arenactl image push arena/cpu/base registry.lab:5000/arena/cpu-base:1"],
    ),
    (
        "image lock",
        &["arenactl image lock --set cpu", "arenactl image lock --set cuda -o cuda.lock"],
    ),
    (
        "image ls",
        &[
            "arenactl image ls",
            "arenactl image ls --image-lock lockfiles/cpu.lock --json",
        ],
    ),
    (
        "image prune",
        &[
            "arenactl image prune --keep-lock lockfiles/cpu.lock --dry-run",
            "arenactl image prune --keep-lock lockfiles/cpu.lock lockfiles/cuda.lock",
        ],
    ),
    (
        "lock",
        &["arenactl lock --set cpu", "arenactl lock --set cuda -o cuda.lock"],
    ),
    (
        "bundle",
        &["arenactl bundle export --image-lock lockfiles/cpu.lock -o cpu.bundle.tar"],
    ),
    (
        "bundle export",
        &["arenactl bundle export --image-lock lockfiles/cpu.lock -o cpu.bundle.tar"],
    ),
    (
        "bundle import",
        &["arenactl bundle import cpu.bundle.tar --lock-out lockfiles/cpu.lock"],
    ),
    (
        "offline",
        &["arenactl offline pack --image-lock lockfiles/cpu.lock -o kit.tar"],
    ),
    (
        "offline pack",
        &["arenactl offline pack --image-lock lockfiles/cpu.lock --agent agents/scripted.toml -o kit.tar"],
    ),
    (
        "offline install",
        &["arenactl offline install kit.tar --prefix /opt/arena --expect sha256:…"],
    ),
    ("offline verify", &["arenactl offline verify --prefix /opt/arena"]),
    (
        "unseen",
        &["arenactl unseen generate tasks --seed 7 -o hidden/set1"],
    ),
    (
        "unseen generate",
        &[
            "arenactl unseen generate tasks --seed 7 -o hidden/set1",
            "arenactl unseen generate tasks --seed 7 -o hidden/set1 --probe lockfiles/cuda.lock",
        ],
    ),
    ("unseen digest", &["arenactl unseen digest hidden/set1"]),
    (
        "unseen eval",
        &["arenactl unseen eval runs/cuda-claude --unseen hidden/set1"],
    ),
    (
        "run",
        &[
            "arenactl run --image-lock lockfiles/cpu.lock --agent scripted --gpus cpu:2",
            "arenactl run --image-lock lockfiles/cuda.lock --agent claude-code \
             --tasks triton2triton/ --secret ANTHROPIC_API_KEY=key.txt",
            "arenactl run --image-lock lockfiles/cuda.lock --agent scripted --runner unix:/run/arena/runner.sock",
        ],
    ),
    (
        "runner",
        &[
            "arenactl runner serve --gpus auto",
            "arenactl runner gpus",
        ],
    ),
    (
        "runner serve",
        &[
            "arenactl runner serve --gpus auto --socket-group arena",
            "arenactl runner serve --listen 0.0.0.0:50551 --token-file /etc/arena/tokens",
        ],
    ),
    (
        "runner gpus",
        &["arenactl runner gpus", "arenactl runner gpus --runner http://gpu1:50551 --json"],
    ),
    ("runner watch", &["arenactl runner watch RUN_ID"]),
    ("runner status", &["arenactl runner status RUN_ID --json"]),
    ("runner cancel", &["arenactl runner cancel RUN_ID"]),
    (
        "eval",
        &["arenactl eval --image-lock lockfiles/cpu.lock --task python2python/arena/matmul \
           --candidate my_matmul.py"],
    ),
    ("cancel", &["arenactl cancel runs/cuda-claude"]),
    ("gc", &["arenactl gc", "arenactl gc --all --json"]),
    ("env", &["arenactl env", "arenactl env --json"]),
    (
        "completions",
        &[
            "arenactl completions bash > /etc/bash_completion.d/arenactl",
            "arenactl completions zsh > \"${fpath[1]}/_arenactl\"",
            "arenactl completions fish > ~/.config/fish/completions/arenactl.fish",
        ],
    ),
];

/// `cmd` (at `path`) and its subcommands, each with its examples after its help.
pub fn add(cmd: clap::Command) -> clap::Command {
    add_at(cmd, "")
}

fn add_at(cmd: clap::Command, path: &str) -> clap::Command {
    let cmd = match EXAMPLES.iter().find(|(p, _)| *p == path) {
        Some((_, lines)) => {
            let mut text = String::from("Examples:\n");
            for l in lines.iter() {
                text.push_str("  ");
                text.push_str(l);
                text.push('\n');
            }
            // Kept below what the command already says after its help (if anything).
            match cmd.get_after_help() {
                Some(before) => {
                    let joined = format!("{before}\n\n{}", text.trim_end());
                    cmd.after_help(joined)
                }
                None => cmd.after_help(text.trim_end().to_string()),
            }
        }
        None => cmd,
    };
    cmd.mut_subcommands(|sub| {
        let name = sub.get_name().to_string();
        let sub_path = if path.is_empty() {
            name
        } else {
            format!("{path} {name}")
        };
        add_at(sub, &sub_path)
    })
}
