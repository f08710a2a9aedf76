//! `arenactl runner serve|exec|gpus`: the runner daemon, its one-shot mode (a Slurm job's
//! task run), and what its GPUs are doing.

use std::sync::Arc;

use arena_proto::v1::runner_client::RunnerClient;
use arena_proto::v1::ListGpusRequest;
use arena_run::events::Events;
use arena_run::Item;
use arena_runner::{Engine, ExecRequest, Policy, Resources, RunnerError, RunnerService};

use super::containerd::connect;
use super::{print_json, runtime, Outcome};
use crate::cli::{RunnerArgs, RunnerCommand};

/// An engine on the local containerd with the GPUs of `args`; `extra_roots` are agent mount
/// roots besides the configured ones.
pub async fn local_engine(
    args: &RunnerArgs,
    extra_roots: &[std::path::PathBuf],
) -> anyhow::Result<Arc<Engine>> {
    let gpus = arena_runner::parse_gpus(&args.gpus)?;
    let visible = [
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok());
    let gpus = if args.gpus == "auto" {
        arena_runner::restrict_visible(gpus, visible.as_deref())?
    } else {
        gpus
    };
    let c = connect(&args.containerd).await?;
    let store = args.store.store()?;
    let mut roots = args.agent_mount_roots.clone();
    roots.extend(extra_roots.iter().cloned());
    let policy = Policy::new(args.allow_host_network, &roots, Vec::new())?;
    let resources = Resources::for_host(gpus.len(), args.cpus_per_gpu, args.workspace_size);
    Ok(Arc::new(
        Engine::new(
            Arc::new(c),
            store,
            gpus,
            vec![args.agents_dir.clone()],
            policy,
        )
        .with_resources(resources),
    ))
}

pub fn run(cmd: RunnerCommand) -> anyhow::Result<Outcome> {
    match cmd {
        RunnerCommand::Serve { listen, runner } => runtime()?.block_on(async {
            let engine = local_engine(&runner, &[]).await?;
            let gpus: Vec<String> = engine
                .pool
                .gpus()
                .iter()
                .map(|g| format!("{}:{}", g.index, g.kind))
                .collect();
            eprintln!("arena runner on {listen}, GPUs [{}]", gpus.join(", "));
            tonic::transport::Server::builder()
                .add_service(RunnerService::new(engine).into_server())
                .serve_with_shutdown(listen, async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await?;
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
        RunnerCommand::Gpus { runner, out } => runtime()?.block_on(async {
            let mut client = RunnerClient::connect(runner.clone()).await?;
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
    }
}
