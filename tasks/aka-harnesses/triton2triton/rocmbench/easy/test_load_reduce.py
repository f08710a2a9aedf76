"""arena's trusted harness for AgentKernelArena's rocmbench/easy/test_load_reduce.

The task's file holds the kernel above a rule and its pytest tests below, which time it in
the kernel's own process. arena's evaluator imports this file instead: the kernel process
runs only the kernel part (KERNEL_PART) and launches the bare Triton kernel (one program over
one BLOCK_M x BLOCK_N block, LAUNCH), the inputs come from a secret seed, every call is
replayed in a CUDA graph and its output checked (docs/trusted-evaluation.md). Shapes and
dtypes are the task's test_performance parameters (14 shapes, three dtypes: 42
configurations), the tolerance its test_load_reduce's assert_close; the output buffer comes
poisoned (NaN), so that doing nothing fails.
"""
import torch

SOURCE = "test_load_reduce.py"
ENTRY = "load_reduce_kernel"
DEVICE = "cuda"
KERNEL_PART = True
LAUNCH = True
_BLOCKS = [
    (128, 64), (128, 128), (128, 256), (128, 512), (128, 1024),
    (256, 64), (256, 128), (256, 256), (256, 512),
    (512, 64), (512, 128), (512, 256),
    (1024, 64), (1024, 128),
]
# (BLOCK_M, BLOCK_N, dtype), the task's test_performance parameters, in its order.
TEST_SHAPES = [(m, n, d) for d in ("float16", "float32", "bfloat16") for m, n in _BLOCKS]
# load_reduce_kernel[(1,)](x, y, stride_xm, stride_xn, stride_y, BLOCK_M=, BLOCK_N=) writes y
# (argument 2, after the launch's grid and meta).
OUTPUT_ARGS = (2,)
ATOL = 1e-3
RTOL = 1e-2


def make_inputs(shape, seed):
    m, n, dtype = shape
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn((m, n), generator=g, device=DEVICE, dtype=getattr(torch, dtype))
    y = torch.full((m,), float("nan"), device=DEVICE, dtype=x.dtype)
    launch = {"grid": [1], "meta": {"BLOCK_M": m, "BLOCK_N": n}}
    return launch, x, y, n, 1, 1


def reference(launch, x, y, stride_xm, stride_xn, stride_y):
    return x.max(dim=1).values
