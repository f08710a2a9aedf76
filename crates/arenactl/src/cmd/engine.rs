//! The runner's engine on this machine's containerd: its GPUs (`--gpus`, cut to what this
//! process was handed), its store, and the policy of what callers may mount and name.

use std::sync::Arc;

use arena_runner::{Engine, Policy, Resources};

use super::containerd::connect;
use crate::cli::RunnerArgs;

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
    let gpus = arena_runner::gpus::for_host(&args.gpus)?;
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
