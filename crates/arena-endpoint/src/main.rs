//! `arena-endpoint`: the scripted endpoint as a process, for a run outside the test suite (the
//! GPU machine's lab run, ci/gpu/lab-first-run.sh). It serves a script from a network
//! namespace of the caller's (the "test host" an agent's egress network reaches) until SIGTERM
//! or SIGINT, then writes every request it answered, one JSON object per line, and exits.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use arena_endpoint::{Endpoint, Script};
use clap::Parser;
use nix::sys::signal::{SigSet, Signal};

#[derive(Parser)]
#[command(
    name = "arena-endpoint",
    about = "Serve a scripted model session (Anthropic Messages, OpenAI Responses) until SIGTERM"
)]
struct Args {
    /// The session's turns (TOML, `[[turn]]` tables).
    #[arg(long)]
    script: PathBuf,
    /// Address to listen on, inside --netns where given.
    #[arg(long)]
    listen: SocketAddr,
    /// A network namespace to serve from (for example /run/netns/NAME).
    #[arg(long)]
    netns: Option<PathBuf>,
    /// Where the answered requests go on exit (JSON lines: path, api_key, body).
    #[arg(long)]
    record: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match serve(&args) {
        Ok(n) => {
            eprintln!(
                "arena-endpoint: {n} requests recorded in {}",
                args.record.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("arena-endpoint: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: &Args) -> Result<usize, String> {
    let script = Script::load(&args.script).map_err(|e| e.to_string())?;
    // Blocked before the server's thread exists, so that it inherits the mask and the signal
    // is taken here, by sigwait, instead of killing the process before the record is written.
    let mut stop = SigSet::empty();
    stop.add(Signal::SIGTERM);
    stop.add(Signal::SIGINT);
    stop.thread_block()
        .map_err(|e| format!("blocking signals: {e}"))?;
    let endpoint = match &args.netns {
        Some(ns) => Endpoint::start_in_netns(ns, args.listen, script),
        None => std::net::TcpListener::bind(args.listen).and_then(|l| Endpoint::start(l, script)),
    }
    .map_err(|e| format!("serving on {}: {e}", args.listen))?;
    eprintln!("arena-endpoint: serving on {}", endpoint.addr);
    let signal = stop
        .wait()
        .map_err(|e| format!("waiting for a signal: {e}"))?;
    eprintln!("arena-endpoint: {signal}, stopping");
    let seen = endpoint.requests();
    let mut out = std::fs::File::create(&args.record)
        .map_err(|e| format!("{}: {e}", args.record.display()))?;
    for r in &seen {
        let line = serde_json::json!({"path": r.path, "api_key": r.api_key, "body": r.body});
        writeln!(out, "{line}").map_err(|e| format!("{}: {e}", args.record.display()))?;
    }
    // Not dropped: its graceful shutdown waits for every connection, and a client stuck in a
    // request would hold this process (SIGTERM blocked) after the record is written. The
    // process exits next, and the sockets with it.
    std::mem::forget(endpoint);
    Ok(seen.len())
}
