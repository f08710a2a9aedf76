//! `arenactl runner serve|gpus`: the runner daemon, and what its GPUs are doing.

use std::sync::Arc;

use arena_proto::v1::runner_client::RunnerClient;
use arena_proto::v1::ListGpusRequest;
use arena_runner::{Engine, RunnerService};

use super::containerd::connect;
use super::{print_json, runtime, Outcome};
use crate::cli::{RunnerArgs, RunnerCommand};

/// An engine on the local containerd with the GPUs of `args`.
pub async fn local_engine(args: &RunnerArgs) -> anyhow::Result<Arc<Engine>> {
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
    Ok(Arc::new(Engine::new(
        c,
        store,
        gpus,
        vec![args.agents_dir.clone()],
    )))
}

pub fn run(cmd: RunnerCommand) -> anyhow::Result<Outcome> {
    match cmd {
        RunnerCommand::Serve { listen, runner } => runtime()?.block_on(async {
            let engine = local_engine(&runner).await?;
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
