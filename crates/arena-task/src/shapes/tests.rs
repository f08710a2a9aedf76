use super::*;

fn t(v: &[i64]) -> Value {
    Value::Tuple(v.iter().map(|i| Value::Int(*i)).collect())
}

const VLLM: &str = r#"import torch

# Visible test shapes: (rows, columns)
TEST_SHAPES = [
    (1, 128),   # tiny
    (64, 1000),
    # (9999, 9999), a commented-out shape is not a shape
    (256, 4_096),
]
WARMUP_ITERATIONS = 10

def f():
    TEST_SHAPES = [(1, 2)]  # a local, not the module-level declaration
"#;

#[test]
fn reads_tuples_comments_and_trailing_commas() {
    let d = read_decl(VLLM, "TEST_SHAPES").unwrap();
    assert_eq!(
        d.entries,
        vec![t(&[1, 128]), t(&[64, 1000]), t(&[256, 4096])]
    );
    assert_eq!(d.line, 4);
    assert_eq!(&VLLM[d.span.0..d.span.0 + 1], "[");
    assert_eq!(&VLLM[d.span.1 - 1..d.span.1], "]");
}

#[test]
fn nested_tuples_dtypes_and_one_tuples() {
    let src =
        "TEST_SHAPES = [((2, 3), 'float16'), (7,), (\"bf16\", None, True, -1, 0.5), [1, 2]]\n";
    let d = read_decl(src, "TEST_SHAPES").unwrap();
    assert_eq!(
        d.entries,
        vec![
            Value::Tuple(vec![t(&[2, 3]), Value::Str("float16".into())]),
            t(&[7]),
            Value::Tuple(vec![
                Value::Str("bf16".into()),
                Value::None,
                Value::Bool(true),
                Value::Int(-1),
                Value::Float(0.5)
            ]),
            Value::List(vec![Value::Int(1), Value::Int(2)]),
        ]
    );
    assert_eq!(t(&[7]).to_python(), "(7,)");
    assert_eq!(d.entries[0].to_python(), "((2, 3), \"float16\")");
}

#[test]
fn annotated_assignment() {
    let d = read_decl(
        "TEST_SHAPES: list[tuple[int, int]] = [(1, 2)]\n",
        "TEST_SHAPES",
    )
    .unwrap();
    assert_eq!(d.entries, vec![t(&[1, 2])]);
}

#[test]
fn computed_shapes_are_refused() {
    for (src, what) in [
        (
            "TEST_SHAPES = [(n, 2 * n) for n in SIZES]\n",
            "the name `SIZES`",
        ),
        ("TEST_SHAPES = [(B, 128)]\n", "the name `B`"),
        ("TEST_SHAPES = [(2 * 1024, 8)]\n", "arithmetic `2 * …`"),
        ("TEST_SHAPES = BASE + [(1, 2)]\n", "`BASE + [(1, 2)]`"),
        (
            "TEST_SHAPES = [(1, 2)] + EXTRA\n",
            "`+ EXTRA` after the list",
        ),
        ("TEST_SHAPES = make_shapes()\n", "`make_shapes()`"),
    ] {
        let e = read_decl(src, "TEST_SHAPES").unwrap_err();
        assert!(matches!(e, ShapeError::NotLiteral { .. }), "{src}: {e}");
        assert!(e.to_string().contains(what), "{src}: {e}");
        assert!(
            e.to_string().contains("computed shapes cannot be read"),
            "{e}"
        );
    }
    assert_eq!(
        read_decl("SHAPES = []\nTEST_SHAPES_X = []\n", "TEST_SHAPES").unwrap_err(),
        ShapeError::NotFound("TEST_SHAPES".into())
    );
    assert!(matches!(
        read_decl("TEST_SHAPES = [(1, 2)\n", "TEST_SHAPES").unwrap_err(),
        ShapeError::Syntax { .. }
    ));
}

#[test]
fn rewrite_replaces_only_the_literal() {
    let d = read_decl(VLLM, "TEST_SHAPES").unwrap();
    let new = vec![t(&[37, 131]), t(&[1, 65536])];
    let out = rewrite(VLLM, &d, &new);
    assert!(out.starts_with("import torch\n\n# Visible test shapes: (rows, columns)\nTEST_SHAPES = [\n    (37, 131),\n    (1, 65536),\n]\nWARMUP_ITERATIONS = 10\n"), "{out}");
    assert!(
        out.ends_with("    TEST_SHAPES = [(1, 2)]  # a local, not the module-level declaration\n")
    );
    assert_eq!(read_decl(&out, "TEST_SHAPES").unwrap().entries, new);
}

#[test]
fn the_sample_tasks_declarations_read() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks");
    for (task, n) in [
        ("python2python/arena/prefix_sum", 3),
        ("python2python/arena/matmul", 3),
        ("triton2triton/arena/row_softmax", 5),
        ("triton2triton/arena/add_rmsnorm", 5),
    ] {
        let src = std::fs::read_to_string(root.join(task).join("scripts/task_runner.py")).unwrap();
        let d = read_decl(&src, "TEST_SHAPES").unwrap();
        assert_eq!(d.entries.len(), n, "{task}");
    }
}

#[test]
fn dicts_and_comprehensions_over_literals_are_read() {
    let d = read_decl(
        "CASES = [\n    {\"name\": \"a\", \"M\": 1, \"N\": 4},\n    dict(m=256, n=512, dtype_str=\"bfloat16\"),\n]\n",
        "CASES",
    )
    .unwrap();
    assert_eq!(
        d.entries[1],
        Value::Dict(vec![
            ("m".into(), Value::Int(256)),
            ("n".into(), Value::Int(512)),
            ("dtype_str".into(), Value::Str("bfloat16".into())),
        ])
    );
    assert_eq!(
        d.entries[0].to_python(),
        "{\"name\": \"a\", \"M\": 1, \"N\": 4}"
    );
    let c = read_decl(
        "S = [(98432, 1024, d) for d in ['float16', 'float32']]\n",
        "S",
    )
    .unwrap();
    assert_eq!(
        c.entries.iter().map(Value::to_python).collect::<Vec<_>>(),
        ["(98432, 1024, \"float16\")", "(98432, 1024, \"float32\")"]
    );
    // A condition, a name the element does not bind, a dict with a computed key: refused.
    for src in [
        "S = [(n, 2) for n in [1, 2] if n]\n",
        "S = [(n, m) for n in [1, 2]]\n",
        "S = [{k: 1}]\n",
    ] {
        assert!(
            matches!(read_decl(src, "S"), Err(ShapeError::NotLiteral { .. })),
            "{src}"
        );
    }
    assert_eq!(
        module_lists("A_SHAPES = [(1, 2)]\nB = f()\nC = [3]\n")
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["A_SHAPES", "C"]
    );
}
