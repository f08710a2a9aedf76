//! `arenactl runner serve|exec|gpus`: the runner daemon, its one-shot mode (a Slurm job's
//! task run), and what its GPUs are doing.

use std::sync::Arc;

use arena_proto::v1::{CancelRunRequest, GetRunRequest, ListGpusRequest, RunState, RunStatus};
use arena_run::events::Events;
use arena_run::Item;
use arena_runner::{Engine, ExecRequest, Policy, Resources, RunnerError};

use super::containerd::connect;
use super::endpoint;
use super::{print_json, runtime, Outcome};
use crate::cli::{RunnerArgs, RunnerCommand};

/// An engine on the local containerd with the GPUs of `args`; `extra_roots` are agent mount
/// roots besides the configured ones.
pub async fn local_engine(
    args: &RunnerArgs,
    extra_roots: &[std::path::PathBuf],
) -> anyhow::Result<Arc<Engine>> {
    local_engine_for(args, extra_roots, Vec::new(), &[], Default::default()).await
}

/// As [`local_engine`], serving callers: `admins` act on every run, token callers name paths
/// below `client_roots`.
pub async fn local_engine_for(
    args: &RunnerArgs,
    extra_roots: &[std::path::PathBuf],
    admins: Vec<String>,
    client_roots: &[std::path::PathBuf],
    eval: arena_runner::evaluate::EvalSettings,
) -> anyhow::Result<Arc<Engine>> {
    let gpus = arena_runner::parse_gpus(&args.gpus)?;
    let visible = arena_runner::gpus::visible_from_env();
    let gpus = if args.gpus == "auto" {
        arena_runner::restrict_visible(gpus, visible.as_deref())?
    } else {
        gpus
    };
    let c = connect(&args.containerd).await?;
    let store = args.store.store()?;
    let mut roots = args.agent_mount_roots.clone();
    roots.extend(extra_roots.iter().cloned());
    let policy =
        Policy::new(args.allow_host_network, &roots, admins)?.with_client_roots(client_roots)?;
    let resources = Resources::for_host(gpus.len(), args.cpus_per_gpu, args.workspace_size);
    Ok(Arc::new(
        Engine::new(
            Arc::new(c),
            store,
            gpus,
            vec![args.agents_dir.clone()],
            policy,
        )
        .with_resources(resources)
        .with_eval_settings(eval),
    ))
}

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
        } => runtime()?.block_on(async move {
            let engine = local_engine(&runner, &[]).await?;
            let gpu = engine.pool.gpus().first().cloned();
            if let Some(g) = &gpu {
                eprintln!(
                    "arena runner exec {task}#{repeat} on GPU {} ({}{})",
                    g.index,
                    g.kind,
                    if g.devices.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", g.devices.join(", "))
                    }
                );
            }
            // The job's log: one line per event.
            let events = Arc::new(Events::default());
            let (_, mut live) = events.subscribe();
            let printer = tokio::spawn(async move {
                while let Ok(ev) = live.recv().await {
                    if let Some(line) = super::run::describe(&ev) {
                        eprintln!("[{}#{}] {line}", ev.task_id, ev.repeat);
                    }
                }
            });
            // scancel and the time limit send SIGTERM: the running container is killed and
            // removed before the job goes.
            let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
                eprintln!("signalled: stopping the task run's containers");
                let _ = cancel_tx.send(true);
            });
            let req = ExecRequest {
                run_dir: super::run::absolute(&run_dir),
                item: Item {
                    task_id: task,
                    repeat,
                },
                agent,
                hidden_set: unseen.as_deref().map(super::run::absolute),
                bundle: bundle.as_deref().map(super::run::absolute),
            };
            let outcome = engine.exec_item(&req, events.clone(), cancel_rx).await;
            drop(events);
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), printer).await;
            match outcome {
                Ok(_) => Ok(Outcome::Ok),
                Err(RunnerError::Cancelled) => Ok(Outcome::Cancelled),
                Err(e) => Err(e.into()),
            }
        }),
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
            super::run::watch(client, &run_id, out.json).await
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

async fn remote_client(r: &crate::cli::Remote) -> anyhow::Result<endpoint::Client> {
    endpoint::client(&r.runner, endpoint::token_file(&r.token_file).as_deref()).await
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
