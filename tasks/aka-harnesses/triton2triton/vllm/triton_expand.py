"""arena's trusted harness for AgentKernelArena's vllm/triton_expand.

arena's evaluator imports this file instead of running the task's own timing: it makes the
inputs from a secret seed, runs the kernel in a process of its own, replays its calls as a
CUDA graph and checks every output (docs/trusted-evaluation.md). Shapes, input distributions
and the reference follow the task's scripts/task_runner.py.
"""
import torch

SOURCE = "source/triton_expand.py"
ENTRY = "expand_batch_to_tokens"
DEVICE = "cuda"
# (batch, tokens_per_req), the task's TEST_SHAPES.
TEST_SHAPES = [(4, 3), (8, 5), (16, 8), (32, 10), (64, 16)]


def make_inputs(shape, seed):
    batch, tpr = shape
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randint(0, 100, (batch,), generator=g, dtype=torch.int32, device=DEVICE)
    counts = torch.full((batch,), tpr, dtype=torch.int32, device=DEVICE)
    cu_num_tokens = torch.cumsum(counts, dim=0)
    return x, cu_num_tokens, batch * tpr


def reference(x, cu_num_tokens, num_tokens):
    counts = torch.diff(cu_num_tokens, prepend=cu_num_tokens.new_zeros(1))
    return torch.repeat_interleave(x, counts, output_size=num_tokens)


def check(got, want):
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"expected a {tuple(want.shape)} {want.dtype} tensor")
    if not torch.equal(got, want):
        raise AssertionError(f"{int((got != want).sum().item())} tokens differ")
