//! Connecting to containerd and importing images into it: a clear error for a socket that is
//! not there (needs nothing), and, against a private containerd per test, a digest other than
//! the locked one refused under its name and concurrent imports of one image. The image is
//! testbase, built by arena-image. Needs root, containerd and runc (ci/setup.sh installs them).

mod common;

use std::io::Read;
use std::path::Path;

use arena_runtime::{ContainerRuntime, Containerd, RuntimeError};
use common::{assert_clean, testbase, Daemon};

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
