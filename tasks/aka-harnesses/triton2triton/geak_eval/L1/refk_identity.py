"""arena's trusted harness for AgentKernelArena's geak_eval/L1/refk_identity.

The task's own harness times its calls with CUDA events on the host's stream (the host's launch
path included); arena's evaluator imports this file instead, makes the inputs from a secret
seed, runs the kernel in a process of its own, replays its calls as a CUDA graph and checks
every output (docs/trusted-evaluation.md). Sizes and the input distribution follow the task's
kernel.py (EVAL_CONFIGS, get_inputs); the kernel copies into its second argument
(OUTPUT_ARGS), which is given poisoned (NaN), so that doing nothing cannot pass.
"""
import torch

SOURCE = "kernel.py"
ENTRY = "identity_triton"
DEVICE = "cuda"
# Element counts of the task's EVAL_CONFIGS (their seeds are the evaluator's here).
TEST_SHAPES = [127, 128, 129, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
# identity_triton(input_tensor, output_tensor) copies into output_tensor.
OUTPUT_ARGS = (1,)


def make_inputs(size, seed):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    data = torch.empty(size, device=DEVICE, dtype=torch.float16).uniform_(0, 1, generator=g)
    return data, torch.full_like(data, float("nan"))


def reference(data, output):
    return data.clone()


def check(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"got {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}")
    if not torch.equal(got, want):
        raise AssertionError(f"{int((got != want).sum().item())} elements differ from the input")
