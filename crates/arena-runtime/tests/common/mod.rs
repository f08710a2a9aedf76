//! Helpers shared by arena-runtime's containerd tests: the testbase image (built once per test
//! binary by arena-image), a private containerd per test (root, containerd and runc needed),
//! and running one container to its outcome.
#![allow(dead_code)] // each test binary uses its own subset

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arena_image::{build, BuildContext, ImageRecord, ImageSpec, LoadedRecipe, NoProgress, Store};
use arena_runtime::{
    run_container, ContainerConfig, ContainerRuntime, Containerd, ImageRef, RunOutcome, RunRequest,
};

/// The engine behind the boundary, as the lifecycle takes it.
pub fn rt(c: &Containerd) -> Arc<dyn ContainerRuntime> {
    Arc::new(c.clone())
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The testbase image, built once per test process into a store under target/.
pub fn testbase() -> &'static (Store, ImageRecord) {
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
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
}

impl Daemon {
    pub fn start() -> Daemon {
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

    pub async fn client(&self) -> Containerd {
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

pub fn config(args: &[&str]) -> ContainerConfig {
    ContainerConfig::command(args)
}

pub async fn run(
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
            on_started: None,
        },
    )
    .await
    .unwrap()
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

pub async fn setup() -> (Daemon, Containerd, ImageRef, tempfile::TempDir) {
    let (store, rec) = testbase();
    let d = Daemon::start();
    let c = d.client().await;
    let image = c.ensure_image(store, rec).await.unwrap();
    (d, c, image, tempfile::tempdir().unwrap())
}

pub async fn assert_clean(c: &Containerd) {
    let left = c.leftovers().await.unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}
