use super::*;
use crate::declarations::Declaration;

fn sample_tasks() -> Vec<Task> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks");
    crate::discover(&root)
        .unwrap()
        .into_iter()
        .map(|f| Task::load(&f.dir, &f.id).unwrap())
        .collect()
}

#[test]
fn sets_are_byte_identical_for_a_seed_and_sealed() {
    let tasks = sample_tasks();
    let d = tempfile::tempdir().unwrap();
    let opts = GenOptions {
        seed: 42,
        ..Default::default()
    };
    let a = write_set(&tasks, opts, &d.path().join("a")).unwrap();
    let b = write_set(&tasks, opts, &d.path().join("b")).unwrap();
    assert_eq!(a, b);
    for f in std::fs::read_dir(d.path().join("a")).unwrap() {
        let name = f.unwrap().file_name();
        assert_eq!(
            std::fs::read(d.path().join("a").join(&name)).unwrap(),
            std::fs::read(d.path().join("b").join(&name)).unwrap()
        );
    }
    // Every sample task declares its shapes: one file each.
    assert_eq!(a.files.len(), tasks.len());
    assert!(a.skipped.is_empty());
    let c = write_set(&tasks, GenOptions { seed: 43, ..opts }, &d.path().join("c")).unwrap();
    assert_ne!(a.set_digest, c.set_digest);
    assert_eq!(
        verify_set(&d.path().join("a")).unwrap().set_digest,
        a.set_digest
    );

    // Tampering with a file or the manifest is named.
    let f = d.path().join("a").join(&a.files[0].file);
    let mut text = std::fs::read_to_string(&f).unwrap();
    text = text.replacen("\"entry\": \"(", "\"entry\": \"(1, ", 1);
    std::fs::write(&f, text).unwrap();
    let e = verify_set(&d.path().join("a")).unwrap_err().to_string();
    assert!(
        e.contains(&format!("files[{}].sha256", a.files[0].file)),
        "{e}"
    );
    // A non-empty output directory is refused.
    let e = write_set(&tasks, opts, &d.path().join("a"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not empty"), "{e}");
}

#[test]
fn unreadable_shapes_are_listed_as_skipped() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    std::fs::create_dir_all(t.join("scripts")).unwrap();
    std::fs::create_dir_all(t.join("source")).unwrap();
    std::fs::write(t.join("source/k.py"), "").unwrap();
    std::fs::write(
        t.join("scripts/task_runner.py"),
        "TEST_SHAPES = [(n, n) for n in range(4)]\n",
    )
    .unwrap();
    std::fs::write(
            t.join("config.yaml"),
            "task_type: python2python\nsource_file_path: [source/k.py]\ncompile_command: [a]\ncorrectness_command: [b]\nperformance_command: [c]\n",
        )
        .unwrap();
    let task = Task::load(&t, "computed").unwrap();
    let m = write_set(&[task], GenOptions::default(), &d.path().join("set")).unwrap();
    assert!(m.files.is_empty());
    assert_eq!(m.skipped[0].task_id, "computed");
    assert!(
        m.skipped[0]
            .reason
            .contains("computed shapes cannot be read"),
        "{:?}",
        m.skipped
    );
}

fn task_with(files: &[(&str, &str)], sources: &str) -> (tempfile::TempDir, Task) {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    for (rel, text) in files {
        let p = t.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::write(
            t.join("config.yaml"),
            format!("task_type: triton2triton\nsource_file_path: [{sources}]\ncompile_command: [a]\ncorrectness_command: [b]\nperformance_command: [c]\n"),
        )
        .unwrap();
    let task = Task::load(&t, "t").unwrap();
    (d, task)
}

#[test]
fn parametrize_tasks_get_sets_for_their_shape_list() {
    let test = "import pytest\n@pytest.mark.parametrize('dtype', ['fp16'])\n@pytest.mark.parametrize('M, N', [(1, 128), (64, 1000)])\ndef test_k(M, N, dtype): pass\n";
    let (_d, task) = task_with(
        &[("kernel.py", "# the agent's\n"), ("test_kernel.py", test)],
        "kernel.py",
    );
    let u = task_unseen(&task, GenOptions::default()).unwrap();
    assert_eq!(u.harness, "test_kernel.py");
    assert_eq!(u.declaration, "parametrize(M, N)");
    assert_eq!(u.configs.len(), 8);
    // The set's entries go back into the file in place of the visible list.
    let entries: Vec<String> = u.configs.iter().map(|c| c.entry.clone()).collect();
    let out =
        crate::declarations::rewrite(test, &Declaration::parse(&u.declaration), &entries).unwrap();
    let back = crate::declarations::read_parametrize(&out, Some("M, N")).unwrap();
    assert_eq!(back.entries.len(), 8);
    assert!(out.contains("@pytest.mark.parametrize('dtype', ['fp16'])"));
}

#[test]
fn get_inputs_tasks_rewrite_both_pytorch_files() {
    let module = "import torch\nbatch_size = 16\ndim = 4096\ndef get_inputs():\n    return [torch.randn(batch_size, dim)]\n";
    let (_d, task) = task_with(
        &[
            ("kernel.hip", "// the agent's\n"),
            ("ref_module.py", module),
            ("ref_func.py", module),
            ("eval_tools/compile.py", "import sys\n"),
        ],
        "kernel.hip",
    );
    let u = task_unseen(&task, GenOptions::default()).unwrap();
    assert_eq!(u.declaration, "get_inputs()");
    assert_eq!(u.harness, "ref_func.py");
    assert_eq!(u.also, ["ref_module.py"]);
    assert!(u.configs.iter().all(|c| c.entry.starts_with('(')));
    // A task whose two files disagree is skipped with both named.
    let other = "N = 3\ndef get_inputs():\n    return [torch.randn(N)]\n";
    let (_d2, task) = task_with(
        &[("kernel.hip", ""), ("a.py", module), ("b.py", other)],
        "kernel.hip",
    );
    let e = task_unseen(&task, GenOptions::default()).unwrap_err();
    assert!(
        e.contains("a.py and b.py") && e.contains("declares different shapes"),
        "{e}"
    );
    // Nothing readable at all: the reason names all three forms.
    let (_d3, task) = task_with(&[("kernel.py", "x = 1\n")], "kernel.py");
    let e = task_unseen(&task, GenOptions::default()).unwrap_err();
    assert!(
        e.contains("TEST_SHAPES") && e.contains("parametrize") && e.contains("get_inputs"),
        "{e}"
    );
}

#[test]
fn a_local_list_of_get_inputs_is_the_declaration_of_every_file_holding_it() {
    let module = "import torch\ndef get_inputs():\n    configs = [\n        ([1024],),\n        ([4096],),\n        ([64, 128],),\n        ([128, 256],),\n    ]\n    for shape in configs:\n        yield [torch.randn(shape[0])]\n";
    let (_d, task) = task_with(
        &[
            ("kernel.hip", "// the agent's\n"),
            ("ref_module.py", module),
            ("ref_func.py", module),
        ],
        "kernel.hip",
    );
    let u = task_unseen(&task, GenOptions::default()).unwrap();
    assert_eq!(u.declaration, "get_inputs().configs");
    assert_eq!(u.harness, "ref_func.py");
    assert_eq!(u.also, ["ref_module.py"]);
    assert_eq!(u.configs.len(), 8);
    // Both forms (1-D and 2-D shapes) get configurations; the rewritten file holds them all.
    assert!(u.configs.iter().any(|c| c.entry.matches(',').count() == 1));
    assert!(u.configs.iter().any(|c| c.entry.matches(',').count() == 2));
    let decl = crate::declarations::Declaration::parse(&u.declaration);
    let entries: Vec<String> = u.configs.iter().map(|c| c.entry.clone()).collect();
    let out = crate::declarations::rewrite(module, &decl, &entries).unwrap();
    let back = crate::declarations::visible_entries(&out, &decl).unwrap();
    assert_eq!(back.len(), 8);
    assert!(out.contains("    for shape in configs:\n"));
}

#[test]
fn the_file_the_commands_run_is_read_and_names_give_roles() {
    // A flydsl-style harness: dict entries under TEST_SHAPES' sibling name, a derived list,
    // a block size that must not move, and the agent's file with a list of its own.
    let harness = "ALL_SHAPES = [\n    {\"name\": \"a\", \"M\": 256, \"N\": 4096, \"BLOCK_N\": 128},\n    {\"name\": \"b\", \"M\": 1024, \"N\": 8192, \"BLOCK_N\": 256},\n]\nHARNESS_SHAPES = ALL_SHAPES[:25]\n";
    let (_d, task) = task_with(
        &[
            ("kernel.py", "EVAL_CONFIGS = [(1, 2)]\n"),
            ("test_kernel_harness.py", harness),
        ],
        "kernel.py",
    );
    let u = task_unseen(&task, GenOptions::default()).unwrap();
    assert_eq!(
        (u.harness.as_str(), u.declaration.as_str()),
        ("test_kernel_harness.py", "ALL_SHAPES")
    );
    for c in &u.configs {
        // Block sizes as a visible configuration has them; labels the configuration's own.
        assert!(
            c.entry.contains("\"BLOCK_N\": 128") || c.entry.contains("\"BLOCK_N\": 256"),
            "{c:?}"
        );
        assert!(c.entry.starts_with("{\"name\": \"unseen"), "{c:?}");
    }
    assert!(set_violations(&task, &u).unwrap().is_empty());
    // A hand-made configuration that moves the block size or breaks the N multiple is named.
    let bad = TaskUnseen {
        configs: vec![crate::unseen::UnseenConfig {
            category: crate::unseen::Category::ScaleUp,
            entry: "{\"name\": \"x\", \"M\": 512, \"N\": 4100, \"BLOCK_N\": 64}".into(),
            original_passed: None,
            breaks_tie: None,
        }],
        ..u.clone()
    };
    let v = set_violations(&task, &bad).unwrap();
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v[0].contains("N = 4100"), "{v:?}");
    assert!(v[1].contains("BLOCK_N"), "{v:?}");

    // Shapes only in the agent's own file: refused by name, not generated.
    let (_d, task) = task_with(
        &[
            ("kernel.py", "EVAL_CONFIGS = [(1, 2), (4, 8)]\n"),
            (
                "test_kernel_harness.py",
                "from kernel import EVAL_CONFIGS\n",
            ),
        ],
        "kernel.py",
    );
    match find_declaration(&task) {
        Err(NotFound::AgentOwned(why)) => assert!(why.contains("kernel.py"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// A sealed set whose manifest and files are then edited and sealed again (sha256s and set
/// digest recomputed): what a set that was made wrongly, not tampered with, looks like.
fn resealed(edit: impl Fn(&mut serde_json::Value, &mut Manifest)) -> (tempfile::TempDir, Manifest) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("set");
    write_set(&sample_tasks(), GenOptions::default(), &dir).unwrap();
    let mut m = verify_set(&dir).unwrap();
    let f = m.files[0].clone();
    let mut u: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(&f.file)).unwrap()).unwrap();
    edit(&mut u, &mut m);
    let bytes = serde_json::to_vec_pretty(&u).unwrap();
    std::fs::write(dir.join(&m.files[0].file), &bytes).unwrap();
    m.files[0].sha256 = sha256_hex(&bytes);
    m.set_digest = m.compute_digest();
    std::fs::write(dir.join(MANIFEST), serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    (d, m)
}

#[test]
fn a_set_file_named_outside_the_set_is_refused_with_its_field() {
    // Resealing writes the file where the name points (beside the set), with its sha256 and
    // the set digest right: only the name is wrong.
    let (d, _) = resealed(|_, m| m.files[0].file = format!("../{}", m.files[0].file));
    let e = verify_set(&d.path().join("set")).unwrap_err().to_string();
    assert!(
        e.contains("files[0].file") && e.contains("is not the set's name"),
        "{e}"
    );
}

#[test]
fn a_task_file_that_names_files_outside_the_task_is_refused_with_its_field() {
    for (field, value, want) in [
        ("harness", serde_json::json!("../../x.py"), "harness"),
        ("harness", serde_json::json!("/etc/passwd"), "harness"),
        ("also", serde_json::json!(["ok.py", "../y.py"]), "also[1]"),
        ("configs", serde_json::json!([]), "configs"),
        ("task_id", serde_json::json!("other/task"), "task_id"),
    ] {
        let (d, m) = resealed(|u, _| u[field] = value.clone());
        let dir = d.path().join("set");
        let f = &verify_set(&dir).unwrap().files[0];
        let e = read_task_set(&dir.join(&f.file), &m.files[0].task_id)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!(": {want}:")), "{field}: {e}");
    }
    let (d, m) = resealed(|_, _| {});
    let u = read_task_set(
        &d.path().join("set").join(&m.files[0].file),
        &m.files[0].task_id,
    );
    assert!(u.is_ok(), "{u:?}");
}
