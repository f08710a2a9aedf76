//! `arenactl runner serve|gpus|watch|status|cancel`: the runner daemon and what it is doing
//! (its one-shot mode, `exec`, in runner_exec.rs).

use arena_proto::v1::{CancelRunRequest, GetRunRequest, ListGpusRequest, RunState, RunStatus};
use arena_run::Item;
use arena_runner::ExecRequest;

use super::endpoint;
use super::engine::local_engine_for;
use super::{print_json, runtime, Outcome};
use crate::cli::RunnerCommand;

pub fn run(cmd: RunnerCommand) -> anyhow::Result<Outcome> {
    match cmd {
        RunnerCommand::Serve {
            listen,
            token_file,
            socket_group,
            admins,
            client_roots,
            eval,
            runner,
        } => runtime()?.block_on(async {
            let tokens = token_file
                .as_deref()
                .map(arena_runner::Tokens::load)
                .transpose()?;
            let group = socket_group.as_deref().map(group_id).transpose()?;
            // root and the runner's own user act on every run; so do the named admins.
            let mut all = vec!["uid:0".to_string(), arena_runner::auth::uid_identity(own_uid())];
            all.extend(admins);
            all.dedup();
            let engine = local_engine_for(&runner, &[], all, &client_roots, eval.settings()).await?;
            let gpus: Vec<String> = engine
                .pool
                .gpus()
                .iter()
                .map(|g| format!("{}:{}", g.index, g.kind))
                .collect();
            let shown = match &listen {
                crate::cli::Listen::Unix(p) => format!("unix:{}", p.display()),
                crate::cli::Listen::Tcp(a) => format!("{a} (bearer tokens)"),
            };
            eprintln!("arena runner on {shown}, GPUs [{}]", gpus.join(", "));
            endpoint::serve(engine.clone(), &listen, tokens, group, async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
            // Warm evaluators go with the runner: their containers are removed, not left.
            engine.shutdown().await;
            Ok(Outcome::Ok)
        }),
        RunnerCommand::Exec {
            run_dir,
            task,
            repeat,
            agent,
            unseen,
            bundle,
            runner,
        } => super::runner_exec::exec(
            &runner,
            ExecRequest {
                run_dir: super::absolute(&run_dir),
                item: Item {
                    task_id: task,
                    repeat,
                },
                agent,
                hidden_set: unseen.as_deref().map(super::absolute),
                bundle: bundle.as_deref().map(super::absolute),
            },
        ),
        RunnerCommand::Gpus { remote, out } => runtime()?.block_on(async {
            let mut client = remote_client(&remote).await?;
            let gpus = client.list_gpus(ListGpusRequest {}).await?.into_inner().gpus;
            if out.json {
                let v: Vec<_> = gpus
                    .iter()
                    .map(|g| serde_json::json!({"index": g.index, "kind": g.kind, "devices": g.devices, "busy_with": g.busy_with}))
                    .collect();
                print_json(&v)?;
            } else {
                for g in gpus {
                    let busy = if g.busy_with.is_empty() { "free".to_string() } else { g.busy_with };
                    println!("{}  {:7} {:40} {}", g.index, g.kind, g.devices.join(","), busy);
                }
            }
            Ok(Outcome::Ok)
        }),
        RunnerCommand::Watch { run_id, remote, out } => runtime()?.block_on(async {
            let client = remote_client(&remote).await?;
            super::run_follow::watch(client, &run_id, out.json).await
        }),
        RunnerCommand::Status { run_id, remote, out } => runtime()?.block_on(async {
            let mut client = remote_client(&remote).await?;
            let s = client
                .get_run(GetRunRequest { run_id })
                .await?
                .into_inner();
            show_status(&s, out.json)
        }),
        RunnerCommand::Cancel { run_id, remote, out } => runtime()?.block_on(async {
            let mut client = remote_client(&remote).await?;
            let s = client
                .cancel_run(CancelRunRequest { run_id })
                .await?
                .into_inner();
            show_status(&s, out.json)
        }),
    }
}

/// A client of the runner the flags, the environment or the config file name.
async fn remote_client(r: &crate::cli::Remote) -> anyhow::Result<endpoint::Client> {
    let runner =
        crate::config::runner(&r.runner)?.unwrap_or_else(|| crate::cli::DEFAULT_RUNNER.to_string());
    let token = crate::config::token_file(&r.token_file)?;
    super::preflight::token_file(&token)?;
    endpoint::client(&runner, token.as_deref()).await
}

fn show_status(s: &RunStatus, json: bool) -> anyhow::Result<Outcome> {
    let state = RunState::try_from(s.state)
        .map(|st| st.as_str_name().to_ascii_lowercase())
        .unwrap_or_else(|_| s.state.to_string());
    if json {
        print_json(&serde_json::json!({
            "run_id": s.run_id, "state": state, "run_dir": s.run_dir, "total": s.total,
            "finished": s.finished, "errors": s.errors, "error": s.error,
        }))?;
    } else {
        println!(
            "{} {state}: {}/{} task runs finished, {} errors{}  ({})",
            s.run_id,
            s.finished,
            s.total,
            s.errors,
            if s.error.is_empty() {
                String::new()
            } else {
                format!(": {}", s.error)
            },
            s.run_dir
        );
    }
    Ok(Outcome::Ok)
}

/// The runner's own (effective) user id.
fn own_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    // The owner of a file this process creates is its effective uid: no libc call needed.
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}

/// A group given by name (from /etc/group) or number.
fn group_id(g: &str) -> anyhow::Result<u32> {
    if let Ok(n) = g.parse() {
        return Ok(n);
    }
    let groups = std::fs::read_to_string("/etc/group")?;
    groups
        .lines()
        .find_map(|l| {
            let mut f = l.split(':');
            (f.next() == Some(g)).then(|| f.nth(1).and_then(|id| id.parse().ok()))?
        })
        .ok_or_else(|| anyhow::anyhow!("--socket-group {g}: no such group in /etc/group"))
}
