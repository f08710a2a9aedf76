//! The air-gapped path as one archive: `arenactl offline pack` on this (connected)
//! machine, then, in a network namespace without routes where the host's own containerd, ctr,
//! runc, nft and CNI plugins are masked, the kit's own arenactl installs it into a new prefix
//! (every file and digest verified), verifies it again, starts the kit's containerd and runs
//! a CPU sample task with an unseen evaluation from it. Damaged kits, a wrong digest and a
//! prefix in use are refused with nothing installed. Needs root, `unshare` and `mount`.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::daemon::*;
use common::{debs, repo};
use serde_json::Value;

fn fetch_host_tools(store: &Path) {
    let st = Command::new("bash")
        .arg(repo().join("ci/fetch-debs.sh"))
        .arg(repo().join("images/host-tools.toml"))
        .arg(debs())
        .status()
        .unwrap();
    assert!(st.success(), "ci/fetch-debs.sh images/host-tools.toml");
    let o = arenactl()
        .args([
            "image",
            "verify",
            "--image-lock",
            "lockfiles/host-tools.lock",
            "--store",
        ])
        .arg(store)
        .env("ARENA_DEB_DIR", debs())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
}

fn pack(store: &Path, hidden: &Path, out: &Path) -> Value {
    let o = arenactl()
        .args([
            "offline",
            "pack",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--agent",
            "ci/agents/optimize.toml",
            "--json",
            "--hidden",
        ])
        .arg(hidden)
        .arg("--store")
        .arg(store)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `arenactl offline install KIT --prefix PREFIX [more]`, expected to fail naming `why`, with
/// no prefix made and no staging directory left beside it.
fn refused(kit: &Path, prefix: &Path, more: &[&str], why: &str) {
    let existed = prefix.exists();
    let o = arenactl()
        .args(["offline", "install"])
        .arg(kit)
        .arg("--prefix")
        .arg(prefix)
        .args(more)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(err.contains(why), "expected `{why}`:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        existed || !prefix.exists(),
        "a refused install made {prefix:?}"
    );
    let staging: Vec<_> = std::fs::read_dir(prefix.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".arena-install-"))
        .collect();
    assert!(staging.is_empty(), "a refused install left {staging:?}");
}

/// The kit with the first copy of `needle` changed in one byte.
fn damaged(kit: &Path, needle: &[u8], out: &Path) {
    let mut bytes = std::fs::read(kit).unwrap();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("needle in the kit");
    bytes[at] ^= 0x20;
    std::fs::write(out, bytes).unwrap();
}

#[test]
fn an_offline_kit_installs_verified_into_a_fresh_root_and_runs_a_task_there() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let store = store();
    fetch_host_tools(store);
    let hidden = t.join("hidden");
    let o = arenactl()
        .args([
            "unseen", "generate", "--tasks", "tasks", "--seed", "11", "--out",
        ])
        .arg(&hidden)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));

    // The same inputs pack to the same bytes: one digest pins the kit.
    let kit = t.join("kit.tar");
    let packed = pack(store, &hidden, &kit);
    let again = pack(store, &hidden, &t.join("again.tar"));
    assert_eq!(packed["digest"], again["digest"]);
    assert_eq!(
        std::fs::read(&kit).unwrap(),
        std::fs::read(t.join("again.tar")).unwrap()
    );
    let digest = packed["digest"].as_str().unwrap().to_string();

    // Refused, with nothing installed: a task file changed in one byte, a truncated kit, a
    // digest that is not the kit's, a prefix already in use, an input outside --root.
    let task_file =
        std::fs::read(repo().join("tasks/python2python/arena/matmul/config.yaml")).unwrap();
    damaged(&kit, &task_file[..40], &t.join("bad.tar"));
    refused(
        &t.join("bad.tar"),
        &t.join("p1"),
        &[],
        "share/tasks/python2python/arena/matmul/config.yaml",
    );
    let bytes = std::fs::read(&kit).unwrap();
    std::fs::write(t.join("short.tar"), &bytes[..bytes.len() / 2]).unwrap();
    refused(&t.join("short.tar"), &t.join("p2"), &[], "short.tar");
    let wrong = format!("sha256:{}", "0".repeat(64));
    refused(
        &kit,
        &t.join("p3"),
        &["--expect", &wrong],
        "the kit's digest",
    );
    std::fs::create_dir(t.join("used")).unwrap();
    std::fs::write(t.join("used/x"), "x").unwrap();
    refused(&kit, &t.join("used"), &[], "not empty");
    let outside = t.join("agent.toml");
    std::fs::write(
        &outside,
        "name = \"x\"\nimage = \"task\"\ncommand = [\"true\"]\nnetwork = \"none\"\ntimeout_s = 1\n",
    )
    .unwrap();
    let o = arenactl()
        .args([
            "offline",
            "pack",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--agent",
        ])
        .arg(&outside)
        .arg("-o")
        .arg(t.join("x.tar"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(show(&o).contains("lies outside --root"), "{}", show(&o));
    assert!(!t.join("x.tar").exists());

    // The fresh root: no route out, and none of the host's container tools usable.
    let script = format!(
        r#"set -euxo pipefail
for f in /usr/bin/containerd /usr/bin/containerd-shim-runc-v2 /usr/bin/ctr /usr/sbin/runc /usr/sbin/nft; do
  if [ -e "$f" ]; then mount --bind /dev/null "$f"; fi
done
if [ -d /usr/lib/cni ]; then mount -t tmpfs tmpfs /usr/lib/cni; fi
# A network namespace of its own, with no route anywhere.
test "$(readlink /proc/self/ns/net)" != {host_net}
test -z "$(grep -v '^Iface' /proc/net/route || true)"
cd {t}
tar -xf kit.tar arena-offline/bin/arenactl
arena-offline/bin/arenactl offline install kit.tar --prefix {t}/opt/arena --expect {digest}
. {t}/opt/arena/env.sh
test "$(command -v containerd)" = {t}/opt/arena/bin/containerd
test "$(command -v runc)" = {t}/opt/arena/bin/runc
nft --version
test -x "$ARENA_CNI_PATH/ptp"
arenactl offline verify --prefix {t}/opt/arena
sock=$(bash {repo}/ci/containerd.sh start {t}/ctd)
trap 'bash {repo}/ci/containerd.sh stop {t}/ctd' EXIT
cd {t}/opt/arena/share
arenactl run --image-lock lockfiles/cpu.lock --agent ci/agents/optimize.toml --gpus cpu:1 \
  --containerd "$sock" --unseen {t}/opt/arena/hidden/hidden --out {t}/runs \
  --tasks python2python/arena/matmul --trusted-pairs 3 --perf-pairs 2
"#,
        t = t.display(),
        repo = repo().display(),
        host_net = std::fs::read_link("/proc/self/ns/net").unwrap().display(),
    );
    let o = Command::new("unshare")
        .args(["--net", "--mount", "--propagation", "private", "bash", "-c"])
        .arg(&script)
        .env_remove("ARENA_STORE")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let rs = results(&t.join("runs"));
    assert_eq!(rs.len(), 1);
    let r = &rs[0];
    let s = score(r);
    assert!(
        s.correct && common::tier::reads_faster(s.speedup, 1.0),
        "{r}"
    );
    // The images came from the kit's store, the one its env.sh names.
    assert!(t.join("opt/arena/store/index.json").is_file());
    let u = &r["unseen"];
    let passed = u["optimized_passed"]
        .as_array()
        .unwrap_or_else(|| panic!("{u}"));
    assert!(
        !passed.is_empty() && passed.iter().all(|x| x == true),
        "{u}"
    );
    assert_eq!(
        u["set_digest"],
        packed_hidden_digest(&t.join("opt/arena/MANIFEST.json"))
    );
}

fn packed_hidden_digest(manifest: &Path) -> Value {
    let m: Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
    m["hidden"][0]["digest"].clone()
}
