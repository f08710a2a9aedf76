//! `arenactl image push|resolve|pull` and a recipe on a registry base, against a real registry
//! (Debian's docker-registry on 127.0.0.1): a recipe pinned to a pushed image builds in an
//! empty store (the base is pulled and verified first) to the digests it has where the base
//! was built; a tag resolves to the pin; bad input is refused with the field named.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use arena_registry::testing::LocalRegistry;
use serde_json::Value;

fn arenactl(store: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_arenactl"));
    // No credentials file of this machine's: every test registry here is anonymous.
    c.env("DOCKER_CONFIG", store.with_extension("no-docker-config"));
    c
}

fn show(o: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "{}", show(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(o)))
}

#[test]
fn a_recipe_on_a_pushed_image_builds_in_an_empty_store_with_the_same_digests() {
    let d = tempfile::tempdir().unwrap();
    let reg = LocalRegistry::start(None);
    let dir = d.path();
    std::fs::create_dir_all(dir.join("root/etc")).unwrap();
    std::fs::write(dir.join("root/etc/motd"), "base\n").unwrap();
    std::fs::write(
        dir.join("base.toml"),
        "name = \"regbase\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"directory\"\npath = \"root\"\n",
    )
    .unwrap();
    let (a, b) = (dir.join("store-a"), dir.join("store-b"));
    let built = json(
        &arenactl(&a)
            .args(["image", "build", "--json", "--store"])
            .arg(&a)
            .arg(dir.join("base.toml"))
            .output()
            .unwrap(),
    );
    let manifest = built["image"]["manifest"].as_str().unwrap().to_string();
    let tag = format!("{}/arena/regbase:v1", reg.host);
    // Pushed by store name; the registry's digest is the store's.
    let pushed = json(
        &arenactl(&a)
            .args(["image", "push", "--json", "regbase", &tag, "--store"])
            .arg(&a)
            .output()
            .unwrap(),
    );
    assert_eq!(pushed["manifest"], manifest.as_str());
    let pin = pushed["reference"].as_str().unwrap().to_string();
    assert_eq!(pin, format!("{}/arena/regbase@{manifest}", reg.host));
    let o = arenactl(&a)
        .args(["image", "resolve", &tag])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), pin);

    // A recipe on the pinned base: built where the base is, and in an empty store.
    std::fs::write(dir.join("app.txt"), "app\n").unwrap();
    let derived = format!(
        "name = \"derived\"\n[base]\nkind = \"registry\"\nreference = \"{pin}\"\n[[layer]]\nkind = \"file\"\npath = \"app.txt\"\ntarget = \"/app.txt\"\n"
    );
    std::fs::write(dir.join("derived.toml"), derived).unwrap();
    let build_in = |store: &Path| {
        json(
            &arenactl(store)
                .args(["image", "build", "--json", "--store"])
                .arg(store)
                .arg(dir.join("derived.toml"))
                .output()
                .unwrap(),
        )
    };
    let here = build_in(&a);
    let there = build_in(&b);
    for k in ["manifest", "config", "derivation", "base"] {
        assert_eq!(here["image"][k], there["image"][k], "{k}");
    }
    assert_eq!(there["image"]["base"], manifest.as_str());

    // A pull by tag into a third store prints the pin; the JSON says what it fetched.
    let c = dir.join("store-c");
    let pulled = json(
        &arenactl(&c)
            .args(["image", "pull", "--json", &tag, "--store"])
            .arg(&c)
            .output()
            .unwrap(),
    );
    assert_eq!(pulled["reference"], pin.as_str());
    assert_eq!(pulled["fetched_blobs"], 2);
}

#[test]
fn bad_registry_input_is_refused_with_a_reason() {
    let d = tempfile::tempdir().unwrap();
    let reg = LocalRegistry::start(None);
    let s = d.path().join("store");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["pull".into(), format!("{}/arena/none:v1", reg.host)],
            "not found in the registry",
        ),
        (
            vec!["pull".into(), "Not A Reference".into()],
            "not an image reference",
        ),
        (
            vec![
                "pull".into(),
                format!("{}/a/b:v1", reg.host),
                "--registry-mirror".into(),
                "nomirror".into(),
            ],
            "--registry-mirror nomirror: expected REGISTRY=MIRROR",
        ),
        (
            vec![
                "pull".into(),
                format!("{}/a/b:v1", reg.host),
                "--platform".into(),
                "amd64".into(),
            ],
            "--platform amd64: expected OS/ARCH",
        ),
        (
            vec![
                "pull".into(),
                format!("{}/a/b:v1", reg.host),
                "--auth-file".into(),
                d.path().join("missing.json").display().to_string(),
            ],
            "missing.json",
        ),
        (
            vec![
                "push".into(),
                "no-such-image".into(),
                format!("{}/a/b:v1", reg.host),
            ],
            "no-such-image: neither a manifest digest nor an image name",
        ),
    ];
    for (args, want) in cases {
        let o = arenactl(&s)
            .arg("image")
            .args(&args)
            .arg("--store")
            .arg(&s)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", show(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: want `{want}`: {}", show(&o));
    }
    // A registry base not pinned by digest is refused before anything is fetched.
    std::fs::write(
        d.path().join("tag.toml"),
        format!(
            "name = \"x\"\n[base]\nkind = \"registry\"\nreference = \"{}/a/b:v1\"\n",
            reg.host
        ),
    )
    .unwrap();
    let o = arenactl(&s)
        .args(["image", "build", "--store"])
        .arg(&s)
        .arg(d.path().join("tag.toml"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("base.reference") && err.contains("not pinned by digest"),
        "{}",
        show(&o)
    );
}
