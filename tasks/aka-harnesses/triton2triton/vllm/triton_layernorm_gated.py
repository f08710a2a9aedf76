"""arena's trusted harness for AgentKernelArena's vllm/triton_layernorm_gated.

arena's evaluator imports this file instead of running the task's own timing: it makes the
inputs from a secret seed, runs the kernel in a process of its own, replays its calls as a
CUDA graph and checks every output (docs/trusted-evaluation.md). Shapes, input distributions,
the reference and the tolerance follow the task's scripts/task_runner.py.
"""
import torch

SOURCE = "source/triton_layernorm_gated.py"
ENTRY = "layer_norm_fwd"
DEVICE = "cuda"
# (M, N, is_rms, has_bias, has_z), the task's TEST_SHAPES.
TEST_SHAPES = [
    (32, 128, False, True, False),
    (64, 256, True, False, False),
    (128, 512, True, True, True),
    (256, 1024, False, True, True),
    (512, 2048, True, False, True),
]
ATOL = 1e-2
RTOL = 1e-2
EPS = 1e-5


def make_inputs(shape, seed):
    m, n, is_rms, has_bias, has_z = shape
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    f16 = dict(generator=g, device=DEVICE, dtype=torch.float16)
    x = torch.randn(m, n, **f16)
    w = torch.randn(n, **f16)
    b = torch.randn(n, **f16) if has_bias else None
    z = torch.randn(m, n, **f16) if has_z else None
    # layer_norm_fwd(x, weight, bias, eps, z, out, group_size, norm_before_gate, is_rms_norm),
    # positionally: the task calls it with z and is_rms_norm by keyword, the rest defaulted.
    return x, w, b, EPS, z, None, None, True, is_rms


def reference(x, weight, bias, eps, z, out, group_size, norm_before_gate, is_rms):
    x_f = x.float()
    if is_rms:
        x_hat = x_f * torch.rsqrt((x_f**2).mean(-1, keepdim=True) + eps)
    else:
        mean = x_f.mean(-1, keepdim=True)
        x_hat = (x_f - mean) * torch.rsqrt(((x_f - mean) ** 2).mean(-1, keepdim=True) + eps)
    y = x_hat * weight.float()
    if bias is not None:
        y = y + bias.float()
    if z is not None:
        z_f = z.float()
        y = y * z_f * torch.sigmoid(z_f)
    return y.to(x.dtype)


def check(got, want):
    # layer_norm_fwd returns (out, mean, rstd); the task checks out.
    out = got[0] if isinstance(got, tuple) else got
    if not isinstance(out, torch.Tensor) or out.shape != want.shape or out.dtype != want.dtype:
        raise AssertionError(f"expected a {tuple(want.shape)} {want.dtype} tensor first")
    if not torch.allclose(out.float(), want.float(), atol=ATOL, rtol=RTOL):
        err = (out.float() - want.float()).abs().nan_to_num(float("inf")).max().item()
        raise AssertionError(f"max abs error {err:.3e} exceeds atol={ATOL}, rtol={RTOL}")
