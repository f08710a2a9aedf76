//! arena-runtime against a real containerd: each test starts a private daemon (its own root,
//! state and socket in a temporary directory, stopped by PID at the end) and runs containers
//! from the testbase image built by arena-image. Needs root, containerd and runc
//! (ci/setup.sh installs them).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use arena_image::{build, BuildContext, ImageRecord, ImageSpec, LoadedRecipe, NoProgress, Store};
use std::sync::Arc;

use arena_runtime::cleanup::gc;
use arena_runtime::{
    run_container, BindMount, ContainerConfig, ContainerRuntime, Containerd, GpuProfile, ImageRef,
    Limits, Network, RunOutcome, RunRequest, RuntimeError,
};

/// The engine behind the boundary, as the lifecycle takes it.
fn rt(c: &Containerd) -> Arc<dyn ContainerRuntime> {
    Arc::new(c.clone())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The testbase image, built once per test process into a store under target/.
fn testbase() -> &'static (Store, ImageRecord) {
    static IMG: OnceLock<(Store, ImageRecord)> = OnceLock::new();
    IMG.get_or_init(|| {
        let debs = std::env::var_os("ARENA_DEB_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("target/arena-debs"));
        let ok = Command::new("bash")
            .arg(repo().join("ci/fetch-debs.sh"))
            .arg(repo().join("images/testbase.toml"))
            .arg(&debs)
            .status()
            .unwrap()
            .success();
        assert!(ok, "ci/fetch-debs.sh failed");
        let store = Store::open(&repo().join("target/arena-runtime-test-store")).unwrap();
        let rec = {
            let ctx = BuildContext::new(&store, Some(debs), &NoProgress);
            let recipe = LoadedRecipe::load(&repo().join("images/testbase.toml")).unwrap();
            build(&ctx, &ImageSpec::from_recipe(&recipe).unwrap())
                .unwrap()
                .0
        };
        (store, rec)
    })
}

/// A private containerd (`ci/containerd.sh`, the project's one way to run one), stopped by
/// PID and its mounts released when dropped.
struct Daemon {
    dir: tempfile::TempDir,
    socket: PathBuf,
}

impl Daemon {
    fn start() -> Daemon {
        assert_eq!(
            unsafe { libc_geteuid() },
            0,
            "these tests run a real containerd and need root"
        );
        let dir = tempfile::Builder::new()
            .prefix("arena-ctd-")
            .tempdir()
            .unwrap();
        let out = Command::new("bash")
            .arg(repo().join("ci/containerd.sh"))
            .arg("start")
            .arg(dir.path())
            .output()
            .expect("bash runs ci/containerd.sh");
        assert!(
            out.status.success(),
            "containerd did not start (containerd is installed by ci/setup.sh): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let socket = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        Daemon { dir, socket }
    }

    async fn client(&self) -> Containerd {
        Containerd::connect(&self.socket, "arena-test")
            .await
            .unwrap()
    }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("ci/containerd.sh"))
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

fn config(args: &[&str]) -> ContainerConfig {
    ContainerConfig::command(args)
}

async fn run(
    c: &Containerd,
    image: &ImageRef,
    id: &str,
    cfg: ContainerConfig,
    timeout: Duration,
    logs: &Path,
) -> RunOutcome {
    run_container(
        &rt(c),
        RunRequest {
            id: id.into(),
            image: image.clone(),
            config: cfg,
            timeout,
            log_dir: logs.into(),
            log_cap: 1 << 20,
            labels: HashMap::new(),
            cancel: None,
        },
    )
    .await
    .unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

async fn setup() -> (Daemon, Containerd, ImageRef, tempfile::TempDir) {
    let (store, rec) = testbase();
    let d = Daemon::start();
    let c = d.client().await;
    let image = c.ensure_image(store, rec).await.unwrap();
    (d, c, image, tempfile::tempdir().unwrap())
}

async fn assert_clean(c: &Containerd) {
    let left = c.leftovers().await.unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_binds_really_are_and_the_workspace_is_writable() {
    let (_d, c, image, t) = setup().await;
    let ws = t.path().join("ws");
    let reference = t.path().join("ref");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&reference).unwrap();
    std::fs::write(reference.join("k.py"), "orig").unwrap();
    let mut cfg = config(&[
        "/bin/sh",
        "-c",
        "echo x > /reference/k.py; echo ref=$?; echo y > /workspace/out; echo ws=$?; \
         touch /tmp/t && echo tmp=$?; grep ' /reference ' /proc/mounts",
    ]);
    cfg.binds = vec![
        BindMount {
            source: ws.clone(),
            destination: "/workspace".into(),
            readonly: false,
        },
        BindMount {
            source: reference.clone(),
            destination: "/reference".into(),
            readonly: true,
        },
    ];
    let out = run(
        &c,
        &image,
        "ro-test",
        cfg,
        Duration::from_secs(30),
        t.path(),
    )
    .await;
    let stdout = read(&out.stdout);
    assert!(stdout.contains("ref=1"), "{stdout}{}", read(&out.stderr));
    assert!(
        stdout.contains("ws=0") && stdout.contains("tmp=0"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(" /reference ") && l.contains(" ro,")),
        "{stdout}"
    );
    assert!(
        read(&out.stderr).contains("Read-only file system"),
        "{}",
        read(&out.stderr)
    );
    assert_eq!(read(&reference.join("k.py")), "orig");
    assert_eq!(read(&ws.join("out")), "y\n");
    assert_eq!(out.exit_code, 0);
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_passed_device_appears_with_its_numbers_and_no_other() {
    let (_d, c, image, t) = setup().await;
    let mut cfg = config(&[
        "/bin/sh",
        "-c",
        "stat -c '%F %t:%T' /dev/kfd; head -c 3 /dev/kfd | busybox od -An -tx1; \
         test -e /dev/dri/renderD128 && echo has-dri; test -e /dev/dri/card0; echo card0=$?",
    ]);
    // /dev/zero stands in for /dev/kfd, /dev/null for the render node.
    cfg.devices = GpuProfile::Amd {
        kfd: "/dev/zero".into(),
        dri_nodes: vec!["/dev/null".into()],
    }
    .resolve()
    .unwrap();
    cfg.devices.devices[1].path = "/dev/dri/renderD128".into();
    let out = run(
        &c,
        &image,
        "dev-test",
        cfg,
        Duration::from_secs(30),
        t.path(),
    )
    .await;
    let stdout = read(&out.stdout);
    assert!(
        stdout.contains("character special file 1:5"),
        "{stdout}{}",
        read(&out.stderr)
    );
    assert!(
        stdout.contains("00 00 00"),
        "reading the device is allowed: {stdout}"
    );
    assert!(stdout.contains("has-dri"), "{stdout}");
    // runc's standard nodes (/dev/null, /dev/full…) are always there; GPU nodes only as granted.
    assert!(
        stdout.contains("card0=1"),
        "a device not granted is absent: {stdout}"
    );
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn network_none_cannot_reach_a_host_server_and_host_can() {
    let (_d, c, image, t) = setup().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let mut s = s;
            let _ = s.write_all(b"hello-from-host\n");
        }
    });
    let probe = format!(
        "import socket\ntry:\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('connected', s.recv(64).decode().strip())\nexcept OSError as e:\n    print('refused', e)\n"
    );
    let out = run(
        &c,
        &image,
        "net-none",
        config(&["python3", "-c", &probe]),
        Duration::from_secs(30),
        t.path(),
    )
    .await;
    let none = read(&out.stdout);
    assert!(none.starts_with("refused"), "{none}{}", read(&out.stderr));
    let mut cfg = config(&["python3", "-c", &probe]);
    cfg.network = Network::Host;
    let out = run(
        &c,
        &image,
        "net-host",
        cfg,
        Duration::from_secs(30),
        t.path(),
    )
    .await;
    assert_eq!(read(&out.stdout).trim(), "connected hello-from-host");
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sleep_is_killed_at_its_timeout() {
    let (_d, c, image, t) = setup().await;
    let started = std::time::Instant::now();
    let out = run(
        &c,
        &image,
        "sleeper",
        config(&["/bin/sh", "-c", "sleep 1000 & sleep 1000"]),
        Duration::from_secs(2),
        t.path(),
    )
    .await;
    assert!(out.timed_out);
    assert_eq!(out.exit_code, 137);
    assert!(
        out.durations.run_s >= 2.0 && out.durations.run_s < 10.0,
        "{:?}",
        out.durations
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_bomb_is_stopped_by_the_pids_limit() {
    let (_d, c, image, t) = setup().await;
    let bomb = "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('forks', n, e.errno)\n";
    let mut cfg = config(&["python3", "-c", bomb]);
    cfg.limits = Limits {
        pids: 40,
        ..Limits::default()
    };
    let out = run(&c, &image, "bomb", cfg, Duration::from_secs(20), t.path()).await;
    let stdout = read(&out.stdout);
    let forks: u32 = stdout
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("{stdout}{}", read(&out.stderr)))
        .parse()
        .unwrap();
    assert!(forks < 40, "{stdout}");
    assert!(stdout.trim().ends_with(" 11"), "EAGAIN expected: {stdout}");
    // When the bomb's parent (the container's init) exits, the kernel kills every process
    // left in the container's PID namespace: the sleeping children do not outlive it.
    assert!(!out.timed_out && out.exit_code == 0, "{out:?}");
    assert!(out.durations.run_s < 15.0, "{:?}", out.durations);
    assert!(
        Command::new("true").status().unwrap().success(),
        "the host can still fork"
    );
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn output_is_capped_and_the_exit_code_kept() {
    let (_d, c, image, t) = setup().await;
    let cfg = config(&[
        "/bin/sh",
        "-c",
        "yes | head -c 100000; echo oops >&2; exit 3",
    ]);
    let out = run_container(
        &rt(&c),
        RunRequest {
            id: "chatty".into(),
            image: image.clone(),
            config: cfg,
            timeout: Duration::from_secs(30),
            log_dir: t.path().into(),
            log_cap: 1000,
            labels: HashMap::new(),
            cancel: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, 3);
    assert_eq!(std::fs::metadata(&out.stdout).unwrap().len(), 1000);
    assert_eq!(out.stdout_bytes, 100000);
    assert!(out.stdout_truncated && !out.stderr_truncated);
    assert_eq!(read(&out.stderr), "oops\n");
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_kills_the_container_and_cleans_up() {
    let (_d, c, image, t) = setup().await;
    let (tx, rx) = tokio::sync::watch::channel(false);
    let c2 = c.clone();
    let img = image.clone();
    let logs = t.path().to_path_buf();
    let h = tokio::spawn(async move {
        run_container(
            &rt(&c2),
            RunRequest {
                id: "cancelled".into(),
                image: img,
                config: config(&["sleep", "1000"]),
                timeout: Duration::from_secs(600),
                log_dir: logs,
                log_cap: 1000,
                labels: HashMap::new(),
                cancel: Some(rx),
            },
        )
        .await
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    tx.send(true).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), h)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(out.cancelled && !out.timed_out);
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_digest_under_the_locked_name_is_refused() {
    let (store, rec) = testbase();
    let d = Daemon::start();
    let c = d.client().await;
    c.ensure_image(store, rec).await.unwrap();
    let mut other = rec.clone();
    other.manifest = arena_image::Digest::of_bytes(b"another manifest");
    let e = c.ensure_image(store, &other).await.unwrap_err();
    assert!(matches!(e, RuntimeError::ImageMismatch { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("containerd holds manifest {}", rec.manifest)),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("the lockfile says {}", other.manifest)),
        "{msg}"
    );
    // Importing the same image again is a no-op that verifies.
    let again = c.ensure_image(store, rec).await.unwrap();
    assert_eq!(again.manifest, rec.manifest);
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_removes_what_a_crashed_process_left() {
    use containerd_client::services::v1::snapshots::{
        snapshots_client::SnapshotsClient, PrepareSnapshotRequest,
    };
    use containerd_client::services::v1::{
        containers_client::ContainersClient, Container, CreateContainerRequest,
    };
    let (_d, c, image, _t) = setup().await;
    // What a runner killed between "snapshot prepared, container created" and its teardown
    // leaves: a lease, a snapshot and a container, all labelled as arena's.
    let lease = arena_runtime::containerd::lease::create(
        &c,
        "arena-run-crashed",
        Duration::from_secs(3600),
        &HashMap::new(),
    )
    .await
    .unwrap();
    let labels: HashMap<String, String> =
        [("dev.arena.managed".to_string(), "true".to_string())].into();
    let mut req = tonic::Request::new(PrepareSnapshotRequest {
        snapshotter: "overlayfs".into(),
        key: "crashed".into(),
        parent: image.top_chain_id.to_string(),
        labels: labels.clone(),
    });
    req.metadata_mut()
        .insert("containerd-namespace", "arena-test".parse().unwrap());
    req.metadata_mut()
        .insert("containerd-lease", lease.parse().unwrap());
    SnapshotsClient::new(c.channel())
        .prepare(req)
        .await
        .unwrap();
    let mut req = tonic::Request::new(CreateContainerRequest {
        container: Some(Container {
            id: "crashed".into(),
            labels,
            image: image.name.clone(),
            runtime: Some(containerd_client::services::v1::container::Runtime {
                name: "io.containerd.runc.v2".into(),
                options: None,
            }),
            spec: Some(prost_types::Any {
                type_url: arena_runtime::containerd::SPEC_TYPE_URL.into(),
                value: b"{}".to_vec(),
            }),
            snapshotter: "overlayfs".into(),
            snapshot_key: "crashed".into(),
            ..Default::default()
        }),
    });
    req.metadata_mut()
        .insert("containerd-namespace", "arena-test".parse().unwrap());
    ContainersClient::new(c.channel())
        .create(req)
        .await
        .unwrap();
    let left = c.leftovers().await.unwrap();
    assert_eq!(left.containers, ["crashed"]);
    assert_eq!(left.snapshots, ["crashed"]);
    assert_eq!(left.leases, ["arena-run-crashed"]);
    // Nothing names an owner: the default policy (not --all) removes it all.
    let removed = gc(&c, false).await.unwrap();
    assert_eq!(
        (removed.containers, removed.snapshots, removed.leases),
        (left.containers, left.snapshots, left.leases)
    );
    assert_clean(&c).await;
}

/// Two task runs of one runner, or two Slurm jobs on one node, importing the same image at
/// once into a containerd that does not hold it yet: both get it.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_imports_of_one_image_both_succeed() {
    let (store, rec) = testbase();
    let d = Daemon::start();
    let c = d.client().await;
    let (a, b, e) = tokio::join!(
        c.ensure_image(store, rec),
        c.ensure_image(store, rec),
        c.ensure_image(store, rec)
    );
    let (a, b, e) = (a.unwrap(), b.unwrap(), e.unwrap());
    assert_eq!(a.manifest, b.manifest);
    assert_eq!(a.top_chain_id, e.top_chain_id);
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn import_leases_of_dead_processes_are_removed_and_live_ones_kept() {
    let (_d, c, _image, _t) = setup().await;
    // A process that has exited: its pid is free (no /proc entry) once it is reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    assert!(!Path::new(&format!("/proc/{dead}")).exists());
    let orphan = format!("arena-import-{dead}-0-0123456789ab");
    let live = format!("arena-import-{}-0-0123456789ab", std::process::id());
    for id in [&orphan, &live] {
        arena_runtime::containerd::lease::create(
            &c,
            id,
            Duration::from_secs(3600),
            &HashMap::new(),
        )
        .await
        .unwrap();
    }
    let removed = arena_runtime::cleanup::gc_orphaned_imports(&c)
        .await
        .unwrap();
    assert_eq!(removed, [orphan]);
    assert_eq!(
        c.leftovers().await.unwrap().leases,
        std::slice::from_ref(&live)
    );
    arena_runtime::containerd::lease::delete(&c, &live)
        .await
        .unwrap();
    assert_clean(&c).await;
}

#[test]
fn unknown_socket_is_a_clear_error() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let e = rt
        .block_on(Containerd::connect(
            Path::new("/nonexistent/containerd.sock"),
            "arena",
        ))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("cannot connect to containerd at /nonexistent/containerd.sock"),
        "{e}"
    );
    let _ = std::io::stdin().read(&mut [0u8; 0]);
}
