use super::*;

fn t(v: &[i64]) -> Value {
    Value::Tuple(v.iter().map(|i| Value::Int(*i)).collect())
}

const ROCMBENCH: &str = r#"import pytest
import torch

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "M, N",  # rows, columns
    [
        (1, 128),
        (64, 1000),   # odd width
        (4096, 8192),
    ],
)
@pytest.mark.parametrize('causal', [True, False])
def test_softmax(M, N, dtype, causal):
    x = torch.randn(M, N, dtype=dtype, device="cuda")
"#;

#[test]
fn parametrize_lists_are_read_and_dtype_lists_refused_or_passed_over() {
    let all = parametrize_decorators(ROCMBENCH);
    assert_eq!(all.len(), 3);
    // `torch.float16` is a name: that decorator cannot be read, and is not the shapes.
    assert!(matches!(all[0], Err(ShapeError::NotLiteral { .. })));
    assert_eq!(all[2].as_ref().unwrap().argnames, "causal");
    let d = read_parametrize(ROCMBENCH, None).unwrap();
    assert_eq!(d.argnames, "M, N");
    assert_eq!(
        d.entries,
        vec![t(&[1, 128]), t(&[64, 1000]), t(&[4096, 8192])]
    );
    assert_eq!(d.decl.line, 7);
    let decl = Declaration::parse("parametrize(M,N)");
    assert_eq!(decl, Declaration::Parametrize("M, N".into()));
    assert_eq!(decl.to_string(), "parametrize(M, N)");
    assert_eq!(visible_entries(ROCMBENCH, &decl).unwrap(), d.entries);
}

#[test]
fn parametrize_rewrite_replaces_only_that_list() {
    let decl = Declaration::Parametrize("M, N".into());
    let out = rewrite(ROCMBENCH, &decl, &["(37, 131)".into(), "(1, 65536)".into()]).unwrap();
    assert_eq!(
        visible_entries(&out, &decl).unwrap(),
        vec![t(&[37, 131]), t(&[1, 65536])]
    );
    assert!(out.contains("@pytest.mark.parametrize('causal', [True, False])"));
    assert!(out.contains("[torch.float16, torch.bfloat16]"));
    assert!(out.contains("    \"M, N\",  # rows, columns\n"));
}

#[test]
fn parametrize_keywords_scalars_and_refusals() {
    let src =
        "@pytest.mark.parametrize(argnames=['N'], argvalues=[1024, 4097,])\ndef test(N): pass\n";
    let d = read_parametrize(src, None).unwrap();
    assert_eq!(d.argnames, "N");
    assert_eq!(d.entries, vec![Value::Int(1024), Value::Int(4097)]);
    let out = rewrite(src, &Declaration::Parametrize("N".into()), &["37".into()]).unwrap();
    assert_eq!(
        read_parametrize(&out, Some("N")).unwrap().entries,
        vec![Value::Int(37)]
    );

    let computed = "@pytest.mark.parametrize('M, N', SHAPES)\ndef test(M, N): pass\n";
    let e = read_parametrize(computed, None).unwrap_err().to_string();
    assert!(
        e.contains("parametrize(M, N)") && e.contains("`SHAPES`"),
        "{e}"
    );
    let comp = "@pytest.mark.parametrize('M', [2 ** i for i in range(4)])\ndef t(M): pass\n";
    assert!(matches!(
        read_parametrize(comp, None).unwrap_err(),
        ShapeError::NotLiteral { .. }
    ));
    assert_eq!(
        read_parametrize("def test(): pass\n", None).unwrap_err(),
        ShapeError::NoParametrize(" whose values hold integers".into())
    );
    assert!(read_parametrize(ROCMBENCH, Some("K"))
        .unwrap_err()
        .to_string()
        .contains("\"K\""));
}

const GPUMODE: &str = r#"import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)

batch_size = 16  # rows
dim = 16_384
hidden = dim * 4
dtype = torch.float16

def get_inputs():
    # batch_size rows of dim
    x = torch.randn(batch_size, dim, dtype=dtype)
    return [x]

def get_init_inputs():
    return []
"#;

#[test]
fn get_inputs_constants_are_read_in_order_of_use() {
    let d = read_get_inputs(GPUMODE).unwrap();
    let names: Vec<&str> = d.constants.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["batch_size", "dim"]);
    assert_eq!(d.constants[1].value, 16384);
    assert_eq!(d.line, 13);
    assert_eq!(
        visible_entries(GPUMODE, &Declaration::GetInputs).unwrap(),
        vec![t(&[16, 16384])]
    );
}

#[test]
fn get_inputs_rewrite_sets_each_constant() {
    let out = rewrite(GPUMODE, &Declaration::GetInputs, &["(1, 65536)".into()]).unwrap();
    assert!(
        out.contains("batch_size = 1  # rows\ndim = 65536\nhidden = dim * 4\n"),
        "{out}"
    );
    assert_eq!(
        visible_entries(&out, &Declaration::GetInputs).unwrap(),
        vec![t(&[1, 65536])]
    );
    // One configuration per file; the wrong arity is named.
    let e = rewrite(
        GPUMODE,
        &Declaration::GetInputs,
        &["(1, 2)".into(), "(3, 4)".into()],
    )
    .unwrap_err();
    assert!(e.to_string().contains("2 were given"), "{e}");
    let e = rewrite(GPUMODE, &Declaration::GetInputs, &["(1, 2, 3)".into()]).unwrap_err();
    assert!(e.to_string().contains("batch_size, dim"), "{e}");
}

#[test]
fn get_inputs_refusals() {
    assert_eq!(
        read_get_inputs("x = 1\n").unwrap_err(),
        ShapeError::NoGetInputs
    );
    let literal_only = "def get_inputs():\n    return [torch.randn(16, 128)]\n";
    let e = read_get_inputs(literal_only).unwrap_err().to_string();
    assert!(e.contains("uses no module-level integer constant"), "{e}");
    let computed = "N = 2 ** 10\ndef get_inputs():\n    return [torch.randn(N)]\n";
    let e = read_get_inputs(computed).unwrap_err().to_string();
    assert!(e.contains("computed") && e.contains("N"), "{e}");
    // A constant assigned twice: the last assignment is what Python uses.
    let twice = "N = 4\nN = 8\ndef get_inputs():\n    return [torch.randn(N)]\n";
    let d = read_get_inputs(twice).unwrap();
    assert_eq!(d.constants[0].value, 8);
    assert_eq!(d.constants[0].line, 2);
}

#[test]
fn a_correctness_and_a_performance_parametrize_are_rewritten_alike() {
    let src = "PERF = [(2048, 2048)]\n\
@pytest.mark.parametrize('M, N', [(1, 1), (128, 1)])\ndef test_c(M, N): pass\n\
@pytest.mark.parametrize('M, N', PERF)\n@pytest.mark.parametrize('dtype_str', ['fp16'])\ndef test_p(M, N, dtype_str): pass\n\
@pytest.mark.parametrize('SIZE,BLOCK_SIZE,dtype_str', [(98432, 1024, d) for d in ['float16']])\ndef test_a(): pass\n\
@pytest.mark.parametrize('SIZE,BLOCK_SIZE_ARG,dtype_str', [(4096, 512, 'float32')])\ndef test_b(): pass\n";
    let d = Declaration::Parametrize("M, N".into());
    assert_eq!(
        visible_entries(src, &d)
            .unwrap()
            .iter()
            .map(Value::to_python)
            .collect::<Vec<_>>(),
        ["(1, 1)", "(128, 1)", "(2048, 2048)"]
    );
    let out = rewrite(src, &d, &["(7, 9)".to_string()]).unwrap();
    assert_eq!(out.matches("(7, 9)").count(), 2, "{out}");
    assert!(
        !out.contains("(128, 1)") && !out.contains("(2048, 2048)"),
        "{out}"
    );
    // Argument names that differ after the first name are one group too.
    let s = Declaration::Parametrize("SIZE, BLOCK_SIZE, dtype_str".into());
    let out = rewrite(src, &s, &["(5, 1024, \"float16\")".to_string()]).unwrap();
    assert_eq!(out.matches("(5, 1024, \"float16\")").count(), 2, "{out}");
    assert!(!out.contains("98432") && !out.contains("4096"), "{out}");
}
