//! arenactl: the command-line edge of arena. Library crates do the work; this binary parses
//! arguments, prints, and maps outcomes to exit codes (0 ok, 1 invalid/failed, 2 usage).

mod arg_parse;
mod cli;
mod cmd;
mod config;
mod progress;

use std::process::ExitCode;

use cli::{Cli, Command};
use cmd::Outcome;

/// What a command killed by SIGPIPE exits with in a shell (128 + 13).
const BROKEN_PIPE_EXIT: i32 = 141;

/// `arenactl … | head -1`: once the reader has gone, stdout's next write fails and `println!`
/// panics. That is the reader's choice, not a bug: end quietly, as a shell tool would, with
/// the status a process killed by SIGPIPE has. SIGPIPE itself stays ignored (Rust's default),
/// so a peer closing a runner socket is an error to handle, never a silent death.
fn quiet_on_broken_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        default(info);
    }));
}

/// The log filter: ARENA_LOG when set, else the level -v/-q ask for, else the default of
/// the log format (text: warnings; JSON logs are for machines, which want the lifecycle).
fn log_filter(cli: &Cli) -> tracing_subscriber::EnvFilter {
    let default = match cli.log_format {
        cli::LogFormat::Text => "warn",
        cli::LogFormat::Json => "info",
    };
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => default,
        (false, 1) if default == "info" => "debug",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    tracing_subscriber::EnvFilter::try_from_env("ARENA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level))
}

fn main() -> ExitCode {
    quiet_on_broken_stdout();
    let cli = Cli::parse_with_examples();
    progress::set_quiet(cli.quiet);
    let logs = tracing_subscriber::fmt()
        .with_env_filter(log_filter(&cli))
        .with_writer(std::io::stderr);
    match cli.log_format {
        cli::LogFormat::Text => logs.init(),
        cli::LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
    let result = match cli.command {
        Command::Task(t) => cmd::task::run(t),
        Command::Score(s) => cmd::score::run(s),
        Command::Report(r) => cmd::report::report(r),
        Command::Compare(c) => cmd::report::compare_runs(c),
        Command::Image(i) => cmd::image::run(i),
        Command::Lock(l) => cmd::image::lock(l),
        Command::Bundle(b) => cmd::bundle::run(b),
        Command::Offline(o) => cmd::offline::run(o),
        Command::Unseen(u) => cmd::unseen::run(u),
        Command::Run(r) => cmd::run::run(*r),
        Command::Runner(r) => cmd::runner::run(r),
        Command::Eval(e) => cmd::eval::run(*e),
        Command::Cancel { run_dir, out } => cmd::slurm::cancel(&run_dir, out.json),
        Command::Gc {
            containerd,
            all,
            out,
        } => cmd::containerd::gc(&containerd, all, out.json),
        Command::Env(out) => cmd::env::run(out.json),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut cli::command(),
                "arenactl",
                &mut std::io::stdout(),
            );
            Ok(Outcome::Ok)
        }
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Invalid) => ExitCode::from(1),
        Ok(Outcome::Cancelled) => ExitCode::from(130),
        Ok(Outcome::Partial) => ExitCode::from(3),
        Err(e) => {
            // Each link of the chain once (anyhow's view of the error walks its contexts too).
            let msg = arena_runtime::error::with_causes(e.as_ref());
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}
