//! On a GPU machine: runs a Triton sample task's harness inside an arena-runtime container with
//! the `nvidia` profile (GPU 0 only) and reports what the container sees. The container's root
//! is the testbase image; the host's /usr, /opt, /etc/ld.so.cache and driver directory are bind-mounted read-only
//! over it, because no CUDA PyTorch OCI image is available on an offline GPU host.
//! usage: gpu_check SOCKET STORE TASK_DIR OUT_DIR

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use arena_image::{ImageRecord, Store};
use std::sync::Arc;

use arena_runtime::{
    run_container, BindMount, ContainerConfig, ContainerRuntime, Containerd, GpuProfile, Limits,
    RunRequest,
};

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let [_, socket, store, task, out] = &a[..] else {
        eprintln!("usage: gpu_check SOCKET STORE TASK_DIR OUT_DIR");
        std::process::exit(2);
    };
    let store = Store::open(Path::new(store)).unwrap();
    let entry = store
        .resolve_ref("testbase")
        .unwrap()
        .expect("testbase in store");
    let rec: ImageRecord = std::fs::read_dir(store.root().join("arena/derivations"))
        .unwrap()
        .filter_map(|e| {
            serde_json::from_slice::<ImageRecord>(&std::fs::read(e.unwrap().path()).unwrap()).ok()
        })
        .find(|r| r.manifest == entry.digest)
        .expect("derivation record of testbase");
    let c = Containerd::connect(Path::new(socket), "arena")
        .await
        .unwrap();
    let t = std::time::Instant::now();
    let image = c.ensure_image(&store, &rec).await.unwrap();
    let rt: Arc<dyn ContainerRuntime> = Arc::new(c.clone());
    println!("import: {:.2} s", t.elapsed().as_secs_f64());
    let driver = ["/usr/local/nvidia"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    let devices = GpuProfile::Nvidia {
        dev_dir: "/dev".into(),
        index: 0,
        driver_dir: driver.clone(),
    }
    .resolve()
    .unwrap();
    println!(
        "granted devices: {:?}",
        devices
            .devices
            .iter()
            .map(|d| (&d.path, d.major, d.minor))
            .collect::<Vec<_>>()
    );
    let mut binds: Vec<BindMount> = ["/usr", "/opt", "/etc/ld.so.cache"]
        .iter()
        .map(|p| BindMount {
            source: p.into(),
            destination: p.to_string(),
            readonly: true,
        })
        .collect();
    binds.push(BindMount {
        source: PathBuf::from(task),
        destination: "/task".into(),
        readonly: false,
    });
    let host_path = std::env::var("PATH").unwrap_or_default();
    let script = "set -x; ls /dev | grep -i nvidia; \
        python3 -c 'import torch, triton; print(\"torch\", torch.__version__, \"triton\", triton.__version__, \"cuda_available\", torch.cuda.is_available(), \"device_count\", torch.cuda.device_count(), torch.cuda.get_device_name(0))'; \
        cd /task && python3 scripts/task_runner.py compile && python3 scripts/task_runner.py correctness && python3 scripts/task_runner.py performance; echo harness_rc=$?; cat build/*_report.json";
    let mut env = vec![
        format!("PATH=/opt/torch/.venv/bin:{host_path}"),
        "HOME=/tmp".into(),
        "TRITON_CACHE_DIR=/tmp/triton".into(),
    ];
    if let Ok(ld) = std::env::var("LD_LIBRARY_PATH") {
        env.push(format!("LD_LIBRARY_PATH={ld}"));
    }
    for (i, what) in ["harness", "latency"].iter().enumerate() {
        let args = if *what == "harness" {
            vec!["/bin/sh".to_string(), "-c".to_string(), script.to_string()]
        } else {
            vec!["/bin/true".to_string()]
        };
        let r = run_container(
            &rt,
            RunRequest {
                id: format!("gpu-check-{i}"),
                image: image.clone(),
                config: ContainerConfig {
                    env: env.clone(),
                    binds: binds.clone(),
                    tmp_bytes: 4 << 30,
                    limits: Limits {
                        memory_bytes: 64 << 30,
                        ..Limits::default()
                    },
                    devices: devices.clone(),
                    ..ContainerConfig::command(&args.iter().map(String::as_str).collect::<Vec<_>>())
                },
                timeout: Duration::from_secs(400),
                log_dir: PathBuf::from(out),
                log_cap: 4 << 20,
                labels: HashMap::new(),
                cancel: None,
                on_started: None,
            },
        )
        .await
        .unwrap();
        println!(
            "{what}: exit {} timed_out {} durations {:?}",
            r.exit_code, r.timed_out, r.durations
        );
    }
    let left = c.leftovers().await.unwrap();
    println!("leftovers after: {left:?}");
}
