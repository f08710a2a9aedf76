use std::io::Write;

use super::*;

const PLACE: WheelPlacement = WheelPlacement {
    site_packages: "/usr/local/lib/python3.11/dist-packages",
    prefix: "/usr/local",
    interpreter: "/usr/bin/python3",
};

fn record_line(name: &str, bytes: &[u8]) -> String {
    let h = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(bytes));
    format!("{name},sha256={h},{}\n", bytes.len())
}

/// A wheel of `files` (name, bytes, unix mode) with a RECORD listing all but `unlisted`.
fn wheel(files: &[(&str, &[u8], u32)], unlisted: &[&str]) -> Vec<u8> {
    wheel_of("demo-1.0", files, unlisted)
}

fn wheel_of(dist: &str, files: &[(&str, &[u8], u32)], unlisted: &[&str]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let mut record = String::new();
    for (name, bytes, mode) in files {
        let opts = zip::write::SimpleFileOptions::default().unix_permissions(*mode);
        w.start_file(*name, opts).unwrap();
        w.write_all(bytes).unwrap();
        if !unlisted.contains(name) {
            record.push_str(&record_line(name, bytes));
        }
    }
    record.push_str(&format!("{dist}.dist-info/RECORD,,\n"));
    w.start_file(
        format!("{dist}.dist-info/RECORD"),
        zip::write::SimpleFileOptions::default(),
    )
    .unwrap();
    w.write_all(record.as_bytes()).unwrap();
    w.finish().unwrap().into_inner()
}

fn base_files() -> Vec<(&'static str, &'static [u8], u32)> {
    vec![
        ("demo/__init__.py", b"def main():\n    return 0\n", 0o644),
        ("demo/_native.so", b"\x7fELF...", 0o755),
        (
            "demo-1.0.dist-info/WHEEL",
            b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n",
            0o644,
        ),
        (
            "demo-1.0.dist-info/METADATA",
            b"Name: demo\nVersion: 1.0\n",
            0o644,
        ),
        (
            "demo-1.0.dist-info/entry_points.txt",
            b"[console_scripts]\ndemo-cli = demo:main\ndemo-sub = demo.sub:App.run [extra]\n",
            0o644,
        ),
        (
            "demo-1.0.data/scripts/demo-tool",
            b"#!python\nprint('x')\n",
            0o644,
        ),
        ("demo-1.0.data/data/share/demo/x.txt", b"data\n", 0o644),
        ("demo-1.0.data/headers/demo.h", b"int x;\n", 0o644),
    ]
}

fn files_of(tree: &LayerTree) -> BTreeMap<String, (Vec<u8>, u32)> {
    tree.entries()
        .filter_map(|e| match &e.kind {
            EntryKind::File {
                content: Content::Bytes(b),
                ..
            } => Some((e.path.clone(), (b.to_vec(), e.mode))),
            _ => None,
        })
        .collect()
}

#[test]
fn a_wheel_lands_where_pip_puts_it_with_generated_scripts() {
    let w = wheel(&base_files(), &[]);
    let mut tree = LayerTree::new();
    let n = unpack_into(&mut tree, Path::new("demo.whl"), &w, &PLACE, "wheel demo").unwrap();
    let files = files_of(&tree);
    assert_eq!(n, files.len());
    let sp = "usr/local/lib/python3.11/dist-packages";
    assert_eq!(files[&format!("{sp}/demo/__init__.py")].1, 0o644);
    assert_eq!(files[&format!("{sp}/demo/_native.so")].1, 0o755);
    assert!(files.contains_key(&format!("{sp}/demo-1.0.dist-info/RECORD")));
    let (tool, mode) = &files["usr/local/bin/demo-tool"];
    assert_eq!(tool, b"#!/usr/bin/python3\nprint('x')\n");
    assert_eq!(*mode, 0o755);
    assert!(files.contains_key("usr/local/share/demo/x.txt"));
    assert!(files.contains_key("usr/local/include/demo/demo.h"));
    let cli = String::from_utf8(files["usr/local/bin/demo-cli"].0.clone()).unwrap();
    assert!(cli.starts_with("#!/usr/bin/python3\n") && cli.contains("from demo import main\n"));
    assert!(cli.contains("sys.exit(main())"));
    let sub = String::from_utf8(files["usr/local/bin/demo-sub"].0.clone()).unwrap();
    assert!(sub.contains("from demo.sub import App\n") && sub.contains("sys.exit(App.run())"));
    // The same bytes give the same tree.
    let mut again = LayerTree::new();
    unpack_into(&mut again, Path::new("demo.whl"), &w, &PLACE, "wheel demo").unwrap();
    assert_eq!(files_of(&again), files);
}

#[test]
fn a_file_changed_after_its_record_or_missing_from_it_is_refused() {
    // A file whose bytes are not the ones RECORD hashes.
    let mut files = base_files();
    let good = wheel(&files, &[]);
    files[0].1 = b"def main():\n    return 1\n";
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let mut z = zip::ZipArchive::new(Cursor::new(good)).unwrap();
    for i in 0..z.len() {
        let mut f = z.by_index(i).unwrap();
        let name = f.name().to_string();
        let mut b = Vec::new();
        f.read_to_end(&mut b).unwrap();
        if name == "demo/__init__.py" {
            b = files[0].1.to_vec();
        }
        w.start_file(name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(&b).unwrap();
    }
    let tampered = w.finish().unwrap().into_inner();
    let e = unpack_into(
        &mut LayerTree::new(),
        Path::new("t.whl"),
        &tampered,
        &PLACE,
        "t",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("t.whl entry demo/__init__.py: digest mismatch"),
        "{e}"
    );

    let w = wheel(&base_files(), &["demo/_native.so"]);
    let e = unpack_into(&mut LayerTree::new(), Path::new("u.whl"), &w, &PLACE, "u")
        .unwrap_err()
        .to_string();
    assert!(e.contains("demo/_native.so: not listed in RECORD"), "{e}");
}

#[test]
fn unsafe_or_malformed_wheels_are_refused_with_the_reason() {
    type Files = Vec<(&'static str, &'static [u8], u32)>;
    let cases: Vec<(Files, &str)> = vec![
        (
            {
                let mut f = base_files();
                f.push(("../../etc/passwd", b"root", 0o644));
                f
            },
            "path contains `..`",
        ),
        (
            {
                let mut f = base_files();
                f.push(("other-2.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n", 0o644));
                f
            },
            "expected one NAME.dist-info/WHEEL, found 2",
        ),
        (
            {
                let mut f = base_files();
                f[4].1 = b"[console_scripts]\nevil = os; import os:system\n";
                f
            },
            "is not a script entry",
        ),
        (
            {
                let mut f = base_files();
                f.push(("demo-1.0.data/elsewhere/x", b"x", 0o644));
                f
            },
            "unknown wheel data scheme `elsewhere`",
        ),
    ];
    for (files, want) in cases {
        let w = wheel(&files, &[]);
        let e = unpack_into(&mut LayerTree::new(), Path::new("x.whl"), &w, &PLACE, "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "want `{want}`: {e}");
    }
    let e = unpack_into(
        &mut LayerTree::new(),
        Path::new("n.whl"),
        b"PK nope",
        &PLACE,
        "n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("not a wheel"), "{e}");
}

#[test]
fn a_file_two_wheels_share_is_one_file_unless_they_differ() {
    let shared = |dist: &'static str, init: &'static [u8], pkg: &'static str| {
        let wheel_file = format!("{dist}.dist-info/WHEEL");
        let files: Vec<(&str, &[u8], u32)> = vec![
            (wheel_file.as_str(), b"Wheel-Version: 1.0\n", 0o644),
            ("ns/__init__.py", init, 0o644),
            (pkg, b"x = 1\n", 0o644),
        ];
        wheel_of(dist, &files, &[])
    };
    let mut tree = LayerTree::new();
    unpack_into(
        &mut tree,
        Path::new("a.whl"),
        &shared("a-1.0", b"", "ns/a.py"),
        &PLACE,
        "wheel a",
    )
    .unwrap();
    // The same namespace file again: one file.
    unpack_into(
        &mut tree,
        Path::new("b.whl"),
        &shared("b-1.0", b"", "ns/b.py"),
        &PLACE,
        "wheel b",
    )
    .unwrap();
    assert!(files_of(&tree).contains_key("usr/local/lib/python3.11/dist-packages/ns/b.py"));
    let e = unpack_into(
        &mut tree,
        Path::new("c.whl"),
        &shared("c-1.0", b"raise SystemExit\n", "ns/c.py"),
        &PLACE,
        "wheel c",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("ns/__init__.py") && e.contains("wheel c"), "{e}");
}

#[test]
fn a_wheel_whose_requires_python_excludes_the_image_is_refused() {
    let with = |meta: &'static [u8]| {
        let files: Vec<(&str, &[u8], u32)> = base_files()
            .into_iter()
            .map(|(n, b, m)| match n.ends_with("/METADATA") {
                true => (n, meta, m),
                false => (n, b, m),
            })
            .collect();
        wheel(&files, &[])
    };
    let unpack = |w: &[u8], place: &WheelPlacement| {
        unpack_into(&mut LayerTree::new(), Path::new("demo.whl"), w, place, "w")
    };
    let ok = with(b"Name: demo\nVersion: 1.0\nRequires-Python: >=3.10\n");
    unpack(&ok, &PLACE).unwrap();
    let no = with(b"Name: demo\nVersion: 1.0\nRequires-Python: !=3.14.1,>=3.12\n");
    let e = unpack(&no, &PLACE).unwrap_err().to_string();
    assert!(
        e.contains("demo.whl") && e.contains(">=3.12") && e.contains("Python 3.11"),
        "{e}"
    );
    // A layer whose site-packages names no Python checks nothing.
    let anywhere = WheelPlacement {
        site_packages: "/x",
        ..PLACE
    };
    unpack(&no, &anywhere).unwrap();
}
