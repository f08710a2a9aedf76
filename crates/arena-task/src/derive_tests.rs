use super::*;

const RUNNER: &str = r#"import torch
TEST_SHAPES = [
    (32, 128),
    (64, 512),
]


def load_module():
    pass


def reference(x):
    return x


def run_correctness():
    import torch
    try:
        mod = load_module()
    except Exception as e:
        return False, f"Failed to load module: {e}"
    for i, (rows, hidden) in enumerate(TEST_SHAPES):
        torch.manual_seed(42 + i)
        x = torch.randn(rows, hidden, device="cuda")
        dtype = mod._get_fp8_dtype()
        result = mod.rms_norm(x, eps=1e-6)
        if not torch.allclose(result, reference(x), atol=1e-2, rtol=1e-2):
            return False, "bad"
    return True, None


def run_performance():
    mod = load_module()
    mod.other(1)
"#;

fn config(kind: &str, sources: &[&str]) -> TaskConfig {
    let sources: Vec<String> = sources.iter().map(|s| format!("  - {s}\n")).collect();
    let text = format!(
        "source_file_path:\n{}target_kernel_functions: [k]\ncompile_command: [python3 scripts/task_runner.py compile]\n\
         correctness_command: [python3 scripts/task_runner.py correctness]\n\
         performance_command: [python3 scripts/task_runner.py performance]\ntask_type: {kind}\n",
        sources.concat()
    );
    TaskConfig::parse(Path::new("config.yaml"), &text).expect("a valid config")
}

fn task(runner: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("scripts")).unwrap();
    std::fs::write(d.path().join("scripts/task_runner.py"), runner).unwrap();
    d
}

fn reason(runner: &str) -> String {
    let d = task(runner);
    derive(d.path(), &config("triton2triton", &["source/k.py"]))
        .expect_err("not derivable")
        .construct
}

#[test]
fn a_regular_runner_is_derived_with_its_entry_and_list() {
    let d = task(RUNNER);
    let got = derive(d.path(), &config("triton2triton", &["source/k.py"])).unwrap();
    assert_eq!(
        got,
        Derivation {
            runner: "scripts/task_runner.py".into(),
            source: "source/k.py".into(),
            entry: "rms_norm".into(),
            cases: "TEST_SHAPES".into(),
        }
    );
    let text = harness_text(&got);
    assert!(text.starts_with(DERIVED_MARKER), "{text}");
    assert!(
        text.contains(r#"derived.from_runner(globals(), runner="scripts/task_runner.py", source="source/k.py", entry="rms_norm", cases="TEST_SHAPES")"#),
        "{text}"
    );
}

#[test]
fn each_construct_the_evaluator_cannot_follow_is_named() {
    let cases = [
        (
            RUNNER.replace("torch.manual_seed(42 + i)", "np.random.seed(i)"),
            "numpy's random numbers",
        ),
        (
            RUNNER.replace("torch.manual_seed(42 + i)", "random.seed(i)"),
            "Python's random module",
        ),
        (
            RUNNER.replace("def load_module", "def other_loader"),
            "no load_module()",
        ),
        (
            RUNNER.replace("def run_correctness", "def run_check"),
            "no run_correctness()",
        ),
        (
            RUNNER.replace("enumerate(TEST_SHAPES)", "TEST_SHAPES"),
            "first loop is not",
        ),
        (
            RUNNER.replace("TEST_SHAPES = [", "TEST_SHAPES = list(["),
            "not a list literal",
        ),
        (
            RUNNER.replace("mod.rms_norm(", "mod.rms_norm_other(x) + mod.rms_norm("),
            "2 public functions",
        ),
        (
            RUNNER.replace("mod.rms_norm(", "helper("),
            "calls no public function",
        ),
        (
            RUNNER.replace("torch.allclose", "close_enough"),
            "compares with none",
        ),
    ];
    for (runner, want) in cases {
        let got = reason(&runner);
        assert!(got.contains(want), "expected {want:?}, got {got:?}");
    }
}

#[test]
fn only_triton_tasks_with_one_source_file_are_derived() {
    let d = task(RUNNER);
    let e = derive(d.path(), &config("hip2hip", &["source/k.py"])).unwrap_err();
    assert!(e.construct.contains("task_type hip2hip"), "{e}");
    assert!(e.file.ends_with("config.yaml"), "{e}");
    let e = derive(d.path(), &config("triton2triton", &["a.py", "b.py"])).unwrap_err();
    assert!(e.construct.contains("names 2 files"), "{e}");
    let e = derive(d.path(), &config("instruction2triton", &["source/k.py"]));
    assert!(e.is_ok(), "{e:?}");
    let mut c = config("instruction2triton", &["naive_softmax.py"]);
    c.correctness_command = vec!["pytest -vv -x naive_softmax.py -k 'not test_performance'".into()];
    let e = derive(d.path(), &c).unwrap_err();
    assert!(
        e.construct.contains("under pytest") && e.file.ends_with("naive_softmax.py"),
        "{e}"
    );
}

#[test]
fn trust_names_the_harness_or_the_reason() {
    let d = task(RUNNER);
    let mut c = config("triton2triton", &["source/k.py"]);
    let t = trust_of(d.path(), &c);
    assert_eq!(t.level, "self_reported");
    assert!(t.reason.unwrap().contains("task materialize"));
    c.trusted_harness = Some(HARNESS_FILE.into());
    let derivation = derive(d.path(), &c).unwrap();
    std::fs::write(d.path().join(HARNESS_FILE), harness_text(&derivation)).unwrap();
    assert_eq!(trust_of(d.path(), &c).harness, Some(HarnessKind::Derived));
    std::fs::write(d.path().join(HARNESS_FILE), "SOURCE = 'k.py'\n").unwrap();
    assert_eq!(trust_of(d.path(), &c).harness, Some(HarnessKind::Arena));
    c.trusted_harness = Some("scripts/task_runner.py".into());
    assert_eq!(trust_of(d.path(), &c).harness, Some(HarnessKind::Task));
    let c = config("hip2hip", &["source/k.py"]);
    let t = trust_of(d.path(), &c);
    assert!(t
        .reason
        .unwrap()
        .contains("derived harnesses are for Triton tasks"));
}
