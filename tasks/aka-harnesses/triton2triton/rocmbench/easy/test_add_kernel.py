"""arena's trusted harness for AgentKernelArena's rocmbench/easy/test_add_kernel.

The task's file holds the kernel above a rule and its pytest tests below, which time it in
the kernel's own process. arena's evaluator imports this file instead: the kernel process
runs only the kernel part (KERNEL_PART) and launches the bare Triton kernel on the grid and
block size of each configuration (LAUNCH), the inputs come from a secret seed, every call is
replayed in a CUDA graph and its output checked (docs/trusted-evaluation.md). Sizes, block
sizes, dtypes and the tolerance are the task's test_performance parameters and test_add's
assert_close; the output buffer comes poisoned (NaN), so that doing nothing fails.
"""
import torch

SOURCE = "test_add_kernel.py"
ENTRY = "add_kernel"
DEVICE = "cuda"
KERNEL_PART = True
LAUNCH = True
# (SIZE, BLOCK_SIZE, dtype), the task's test_performance parameters.
TEST_SHAPES = [
    (98432, 1024, "float16"),
    (98432, 1024, "float32"),
    (1048576, 2048, "float16"),
    (1048576, 2048, "float32"),
]
# add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=...) writes output (argument 3, after
# the launch's grid and meta).
OUTPUT_ARGS = (3,)
ATOL = 1e-3
RTOL = 1e-2


def make_inputs(shape, seed):
    size, block, dtype = shape
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    t = dict(generator=g, device=DEVICE, dtype=getattr(torch, dtype))
    x = torch.randn(size, **t)
    y = torch.randn(size, **t)
    out = torch.full_like(x, float("nan"))
    launch = {"grid": [(size + block - 1) // block], "meta": {"BLOCK_SIZE": block}}
    return launch, x, y, out, size


def reference(launch, x, y, out, size):
    return x + y
