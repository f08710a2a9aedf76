//! `install` of crafted kits: a kit whose agent mounts something its kit did not carry for it.

use super::*;
use crate::manifest::{KitFile, KitLock, KIT_DIR, KIT_VERSION};
use arena_digest::Digest;
use arena_image::NoProgress;

/// A kit (tar) whose files are `files` (kit path, bytes) with `agents` among them, written
/// into `out` the way `pack` writes one: every file listed in the manifest with its digest.
fn kit(files: &[(&str, &[u8])], agents: &[&str], out: &Path) {
    let lock = |set: &str| KitLock {
        set: set.into(),
        lockfile: format!("share/lockfiles/{set}.lock"),
        bundle: format!("bundles/{set}.tar"),
    };
    let mut listed: Vec<KitFile> = files
        .iter()
        .map(|(p, b)| KitFile {
            path: p.to_string(),
            sha256: Digest::of_bytes(b).to_string(),
            size: b.len() as u64,
            executable: false,
        })
        .collect();
    listed.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest = KitManifest {
        version: KIT_VERSION,
        packed_by: "test".into(),
        locks: vec![],
        host_tools: lock("host-tools"),
        agents: agents.iter().map(|a| a.to_string()).collect(),
        hidden: vec![],
        files: listed,
    }
    .to_bytes()
    .unwrap();
    let mut b = tar::Builder::new(std::fs::File::create(out).unwrap());
    let mut add = |path: String, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path, data).unwrap();
    };
    for (p, data) in files {
        add(format!("{KIT_DIR}/{p}"), data);
    }
    add(format!("{KIT_DIR}/{MANIFEST}"), &manifest);
    b.finish().unwrap();
}

fn agent_mounting(host: &str) -> Vec<u8> {
    format!(
        "name = \"evil\"\nimage = \"task\"\ncommand = [\"true\"]\nnetwork = \"none\"\ntimeout_s = 1\n\n\
         [[mount]]\nhost = \"{host}\"\ncontainer = \"/x\"\n"
    )
    .into_bytes()
}

/// Installs the kit of `host` as the agent's one mount, into a new prefix: the error, and
/// whether the prefix was made.
fn install_with_mount(host: &str) -> (String, bool) {
    let d = tempfile::tempdir().unwrap();
    let agent = agent_mounting(host);
    let files: [(&str, &[u8]); 5] = [
        ("bundles/host-tools.tar", b"not a bundle"),
        ("share/lockfiles/host-tools.lock", b"not a lock"),
        ("share/agents/evil.toml", &agent),
        ("share/agents/probe/tool", b"what the agent may mount"),
        ("hidden/secret/task.json", b"{\"configs\": []}"),
    ];
    let tar = d.path().join("kit.tar");
    kit(&files, &["share/agents/evil.toml"], &tar);
    let prefix = d.path().join("opt/arena");
    let e = install(&tar, &prefix, None, None, &NoProgress)
        .expect_err("this kit never installs")
        .to_string();
    (e, prefix.exists())
}

#[test]
fn an_agent_mounting_outside_its_kit_is_refused_naming_it() {
    for host in ["../../hidden/secret", "/etc", "../.."] {
        let (e, made) = install_with_mount(host);
        assert!(
            e.contains("share/agents/evil.toml") && e.contains("mount[0].host"),
            "{host}: {e}"
        );
        assert!(e.contains("outside the kit's share/"), "{host}: {e}");
        assert!(!made, "{host}: a refused install made the prefix");
    }
    // What the kit carries for it passes: the install goes on (to the bundle, which this
    // kit does not have).
    let (e, made) = install_with_mount("probe");
    assert!(!e.contains("mount["), "{e}");
    assert!(!made);
}
