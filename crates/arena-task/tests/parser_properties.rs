//! Property tests of the task reader: a task's `config.yaml` is outside input, so
//! any text, and any edit of a real config, must be read or refused with an error that names
//! the file; it must never panic. A config that is read keeps arena's rules: its sources lie
//! inside the task. Inputs that once failed are kept in proptest-regressions/ and run first.

use std::path::{Component, Path, PathBuf};

use arena_mutate::{noise, one_edited, Format};
use arena_task::{Task, TaskConfig};
use proptest::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Task directories of several kinds: arena's samples, AgentKernelArena's task types.
const TASKS: &[&str] = &[
    "tasks/python2python/arena/matmul",
    "tasks/triton2triton/arena/row_softmax",
    "ci/fixtures/aka-slice/tasks/triton2triton/vllm/triton_expand",
    "ci/fixtures/aka-slice/tasks/instruction2triton/rocmbench/naive_softmax",
    "ci/fixtures/aka-slice/tasks/hip2hip/gpumode/GELU",
    "ci/fixtures/aka-slice/tasks/repository/rocprim/device_binary_search",
];

fn a_mutated_config() -> impl Strategy<Value = (usize, Vec<u8>)> {
    let read = |t: &&str| std::fs::read_to_string(repo().join(t).join("config.yaml")).unwrap();
    one_edited(TASKS.iter().map(read).collect(), Format::Yaml)
}

fn inside(rel: &str) -> bool {
    let p = Path::new(rel);
    !p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn any_text_is_read_or_refused_naming_the_file(text in noise()) {
        let file = Path::new("/tasks/x/config.yaml");
        if let Err(e) = TaskConfig::parse(file, &text) {
            prop_assert!(e.to_string().contains("/tasks/x/config.yaml"), "{e}");
        }
    }

    #[test]
    fn an_edited_config_is_read_or_refused_naming_the_file((i, bytes) in a_mutated_config()) {
        // The task as it lies, its config.yaml replaced: Task::load is what every command uses.
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("t");
        copy_dir(&repo().join(TASKS[i]), &dir);
        let file = dir.join("config.yaml");
        std::fs::write(&file, &bytes).unwrap();
        match Task::load(&dir, "t") {
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains(&dir.display().to_string()), "{msg}");
            }
            Ok(task) => {
                for s in &task.config.source_file_path {
                    prop_assert!(inside(s), "a source outside the task was accepted: {s:?}");
                }
            }
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().unwrap().is_dir() {
            copy_dir(&src, &dst);
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A sealed set of the sample tasks, made once: (its directory's files by name).
fn sample_set() -> &'static Vec<(String, Vec<u8>)> {
    static SET: std::sync::OnceLock<Vec<(String, Vec<u8>)>> = std::sync::OnceLock::new();
    SET.get_or_init(|| {
        let root = repo().join("tasks");
        let tasks: Vec<Task> = arena_task::discover(&root)
            .unwrap()
            .into_iter()
            .map(|f| Task::load(&f.dir, &f.id).unwrap())
            .collect();
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("set");
        arena_task::hidden::write_set(&tasks, Default::default(), &dir).unwrap();
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    })
}

fn an_edited_set_file() -> impl Strategy<Value = (usize, Vec<u8>)> {
    let text = |(_, b): &(String, Vec<u8>)| String::from_utf8(b.clone()).unwrap();
    one_edited(sample_set().iter().map(text).collect(), Format::Json)
}

proptest! {
    // More cases than the others: of a set's twenty-odd strings, one or two name files, and
    // one case in about 140 put a path outside the task in one of them (measured by removing
    // the harness check: 138 cases passed before the first failure).
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// A set edited and sealed again (each file's sha256 and the set digest recomputed, where
    /// the manifest still reads): the set's own checks, not its digests, must refuse it.
    #[test]
    fn an_edited_hidden_set_is_read_or_refused_naming_the_file((i, bytes) in an_edited_set_file()) {
        use arena_task::hidden::{read_task_set, verify_set, Manifest};
        use sha2::Digest as _;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("set");
        std::fs::create_dir(&dir).unwrap();
        for (j, (name, b)) in sample_set().iter().enumerate() {
            std::fs::write(dir.join(name), if i == j { &bytes } else { b }).unwrap();
        }
        let mp = dir.join("manifest.json");
        if let Ok(mut m) = serde_json::from_slice::<Manifest>(&std::fs::read(&mp).unwrap()) {
            for f in &mut m.files {
                if let Ok(b) = std::fs::read(dir.join(&f.file)) {
                    f.sha256 = hex_of(&sha2::Sha256::digest(&b));
                }
            }
            m.set_digest = m.compute_digest();
            std::fs::write(&mp, serde_json::to_vec(&m).unwrap()).unwrap();
        }
        let named = |msg: String| msg.contains(&dir.display().to_string());
        match verify_set(&dir) {
            Err(e) => prop_assert!(named(e.to_string()), "{e}"),
            Ok(m) => {
                for f in &m.files {
                    match read_task_set(&dir.join(&f.file), &f.task_id) {
                        Err(e) => prop_assert!(named(e.to_string()), "{e}"),
                        Ok(u) => {
                            prop_assert!(inside(&u.harness), "{:?}", u.harness);
                            prop_assert!(u.also.iter().all(|a| inside(a)), "{:?}", u.also);
                            prop_assert!(!u.configs.is_empty());
                        }
                    }
                }
            }
        }
    }
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
