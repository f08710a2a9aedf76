//! arenactl: the command-line edge of arena. Library crates do the work; this binary parses
//! arguments, prints, and maps outcomes to exit codes (0 ok, 1 invalid/failed, 2 usage).

mod cli;
mod cmd;
mod progress;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};
use cmd::Outcome;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ARENA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Task(t) => cmd::task::run(t),
        Command::Score(s) => cmd::score::run(s),
        Command::Image(i) => cmd::image::run(i),
        Command::Lock(l) => cmd::image::lock(l),
        Command::Bundle(b) => cmd::bundle::run(b),
        Command::Unseen(u) => cmd::unseen::run(u),
        Command::Run(r) => cmd::run::run(r),
        Command::Runner(r) => cmd::runner::run(r),
        Command::Cancel { run_dir, out } => cmd::slurm::cancel(&run_dir, out.json),
        Command::Gc {
            containerd,
            all,
            out,
        } => cmd::containerd::gc(&containerd, all, out.json),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Invalid) => ExitCode::from(1),
        Ok(Outcome::Cancelled) => ExitCode::from(130),
        Err(e) => {
            // Our errors already show their source; add only causes not yet in the message.
            let mut msg = e.to_string();
            for cause in e.chain().skip(1) {
                let c = cause.to_string();
                if !msg.contains(&c) {
                    msg = format!("{msg}: {c}");
                }
            }
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}
