//! Runs `/bin/true` N times through arena-runtime (create, start, wait, delete) and prints the
//! mean time per container and its phases. Used by ci/bench/container-lifecycle.sh.
//! usage: lifecycle SOCKET NAMESPACE LOCKFILE IMAGE_NAME N

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use arena_runtime::{run_container, ContainerConfig, Containerd, ImageRef, RunRequest};

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let [_, socket, ns, lock, name, n] = &a[..] else {
        eprintln!("usage: lifecycle SOCKET NAMESPACE LOCKFILE IMAGE_NAME N");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("N");
    let lock = arena_image::Lockfile::load(Path::new(lock)).expect("lockfile");
    let rec = lock
        .images
        .iter()
        .find(|i| &i.name == name)
        .expect("image in lock");
    let c = Containerd::connect(Path::new(socket), ns)
        .await
        .expect("connect");
    let image: ImageRef = arena_runtime::verify_image(&c, rec)
        .await
        .expect("image loaded");
    let rt: std::sync::Arc<dyn arena_runtime::ContainerRuntime> = std::sync::Arc::new(c);
    let logs = tempfile::tempdir().unwrap();
    let (mut create, mut start, mut run, mut teardown) = (0.0, 0.0, 0.0, 0.0);
    let t0 = Instant::now();
    for i in 0..n {
        let out = run_container(
            &rt,
            RunRequest {
                id: format!("bench-{i}"),
                image: image.clone(),
                config: ContainerConfig::command(&["/bin/true"]),
                timeout: Duration::from_secs(60),
                log_dir: logs.path().into(),
                log_cap: 1 << 16,
                labels: HashMap::new(),
                cancel: None,
                on_started: None,
            },
        )
        .await
        .expect("run");
        assert_eq!(out.exit_code, 0);
        create += out.durations.create_s;
        start += out.durations.start_s;
        run += out.durations.run_s;
        teardown += out.durations.teardown_s;
    }
    let total = t0.elapsed().as_secs_f64();
    let ms = |x: f64| 1000.0 * x / n as f64;
    println!(
        "arena: {n} containers in {total:.2} s, {:.1} ms each (create {:.1}, start {:.1}, run {:.1}, teardown {:.1})",
        ms(total), ms(create), ms(start), ms(run), ms(teardown)
    );
}
