//! `arenactl image push|resolve|pull` and a recipe on a registry base, against a real registry
//! (Debian's docker-registry on 127.0.0.1): a recipe pinned to a pushed image builds in an
//! empty store (the base is pulled and verified first) to the digests it has where the base
//! was built; a tag resolves to the pin; a set on a tagged base is pinned on first lock and
//! stays on that digest when the tag moves, until `--update-pins`; bad input is refused with
//! the field named.

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

/// A refusal: exit 1; its stderr.
fn refused(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "{}", show(o));
    String::from_utf8_lossy(&o.stderr).into_owned()
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

/// Builds a one-file image named `name` into `store` and pushes it to `tag`; its manifest.
fn push_image(dir: &Path, store: &Path, name: &str, motd: &str, tag: &str) -> String {
    let root = dir.join(format!("root-{name}"));
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/motd"), motd).unwrap();
    let recipe = dir.join(format!("{name}.toml"));
    std::fs::write(
        &recipe,
        format!("name = \"{name}\"\n[base]\nkind = \"scratch\"\n[[layer]]\nkind = \"directory\"\npath = \"root-{name}\"\n"),
    )
    .unwrap();
    let built = json(
        &arenactl(store)
            .args(["image", "build", "--json", "--store"])
            .arg(store)
            .arg(&recipe)
            .output()
            .unwrap(),
    );
    json(
        &arenactl(store)
            .args(["image", "push", "--json", name, tag, "--store"])
            .arg(store)
            .output()
            .unwrap(),
    );
    built["image"]["manifest"].as_str().unwrap().to_string()
}

#[test]
fn a_tagged_base_is_pinned_on_first_lock_and_stays_pinned_when_the_tag_moves() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let reg = LocalRegistry::start(None);
    let tag = format!("{}/arena/moving:latest", reg.host);
    let publisher = dir.join("store-publisher");
    let first = push_image(dir, &publisher, "first", "one\n", &tag);

    // A set whose base recipe names the tag, over the sample CPU tasks.
    let tasks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks");
    std::fs::write(
        dir.join("base.toml"),
        format!("name = \"onbase\"\n[base]\nkind = \"registry\"\nreference = \"{tag}\"\n[[layer]]\nkind = \"file\"\npath = \"base.toml\"\ntarget = \"/recipe.toml\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("sets.toml"),
        format!(
            "[[set]]\nname = \"reg\"\nrecipe = \"base.toml\"\ntasks = \"{}\"\ntask_types = [\"python2python\"]\n",
            tasks.display()
        ),
    )
    .unwrap();
    let store = dir.join("store");
    let lockfile = dir.join("reg.lock");
    let lock = |extra: &[&str]| {
        let mut c = arenactl(&store);
        c.args(["lock", "--json", "--set", "reg", "--sets"])
            .arg(dir.join("sets.toml"))
            .arg("--out")
            .arg(&lockfile)
            .arg("--store")
            .arg(&store)
            .args(extra);
        json(&c.output().unwrap())["lock"].clone()
    };
    let pin_of = |l: &Value| {
        assert_eq!(l["pin"].as_array().map(|a| a.len()), Some(1), "{l}");
        assert_eq!(l["pin"][0]["reference"], tag.as_str());
        (
            l["pin"][0]["pinned"].as_str().unwrap().to_string(),
            l["image"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["name"] == "onbase")
                .unwrap()["base"]
                .as_str()
                .unwrap()
                .to_string(),
        )
    };
    let locked = lock(&[]);
    let (pinned, base) = pin_of(&locked);
    assert_eq!(pinned, format!("{}/arena/moving@{first}", reg.host));
    assert_eq!(
        base, first,
        "the image builds on what the tag named at first lock"
    );
    let text = std::fs::read_to_string(&lockfile).unwrap();
    assert!(text.contains("[[pin]]") && text.contains(&pinned), "{text}");

    // The tag moves; a lock keeps the pin (and writes the same lockfile), verify agrees.
    let second = push_image(dir, &publisher, "second", "two\n", &tag);
    assert_ne!(first, second);
    lock(&[]);
    assert_eq!(std::fs::read_to_string(&lockfile).unwrap(), text);

    // --update-pins resolves the tag again: the new image, a new pin.
    let renewed = lock(&["--update-pins"]);
    let (pinned2, base2) = pin_of(&renewed);
    assert_eq!(pinned2, format!("{}/arena/moving@{second}", reg.host));
    assert_eq!(base2, second);

    // The air-gapped flow: a bundle of the lock carries the pinned base; with the registry
    // gone, a lab's empty store imports it and verifies every digest from the lockfile's pin.
    let bundle = dir.join("reg.bundle");
    let o = arenactl(&store)
        .args(["bundle", "export", "--store"])
        .arg(&store)
        .arg("--image-lock")
        .arg(&lockfile)
        .arg("--output")
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    drop(reg);
    let lab = dir.join("store-lab");
    let o = arenactl(&lab)
        .args(["bundle", "import", "--store"])
        .arg(&lab)
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    for s in [&store, &lab] {
        let o = arenactl(s)
            .args(["image", "verify", "--store"])
            .arg(s)
            .arg("--image-lock")
            .arg(&lockfile)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
    }

    // A lockfile that lost its pin (edited by hand) is refused by verify, naming the field.
    let unpinned: String = std::fs::read_to_string(&lockfile)
        .unwrap()
        .split("[[pin]]")
        .next()
        .unwrap()
        .to_string()
        + &std::fs::read_to_string(&lockfile)
            .unwrap()
            .split_once("[[image]]")
            .map(|(_, rest)| format!("[[image]]{rest}"))
            .unwrap();
    std::fs::write(dir.join("unpinned.lock"), unpinned).unwrap();
    let o = arenactl(&store)
        .args(["image", "verify", "--store"])
        .arg(&store)
        .arg("--image-lock")
        .arg(dir.join("unpinned.lock"))
        .output()
        .unwrap();
    let err = refused(&o);
    assert!(
        err.contains("base.reference") && err.contains("holds no pin"),
        "{}",
        show(&o)
    );
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
    // A malformed flag value is a usage error (exit 2), named by clap before anything runs.
    for (flag, value, want) in [
        (
            "--registry-mirror",
            "nomirror",
            "`nomirror`: expected REGISTRY=MIRROR",
        ),
        ("--platform", "amd64", "`amd64`: expected OS/ARCH"),
    ] {
        let o = arenactl(&s)
            .args([
                "image",
                "pull",
                &format!("{}/a/b:v1", reg.host),
                flag,
                value,
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", show(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(flag) && err.contains(want),
            "{flag}: {}",
            show(&o)
        );
    }
    // A build of a registry base named by a tag is refused before anything is fetched.
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
    let err = refused(&o);
    assert!(
        err.contains("base.reference") && err.contains("names a tag, which a build cannot pin"),
        "{}",
        show(&o)
    );
}
