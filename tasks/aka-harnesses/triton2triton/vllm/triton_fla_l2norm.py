"""arena's trusted harness for AgentKernelArena's vllm/triton_fla_l2norm.

arena's evaluator imports this file instead of running the task's own timing: it makes the
inputs from a secret seed, runs the kernel in a process of its own, replays its calls as a
CUDA graph and checks every output (docs/trusted-evaluation.md). The task times one shape
(T=512, D=128, float32) over five seeds; here the seed is the evaluator's. The reference and
tolerance follow the task's scripts/task_runner.py.
"""
import torch

SOURCE = "source/triton_fla_l2norm.py"
ENTRY = "l2norm_fwd"
DEVICE = "cuda"
# (T, D): the task's gen_inputs.
TEST_SHAPES = [(512, 128)]
ATOL = 1e-4
RTOL = 1e-4
EPS = 1e-6


def make_inputs(shape, seed):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    return (torch.randn(*shape, generator=g, device=DEVICE, dtype=torch.float32),)


def reference(x):
    x = x.float()
    return x / torch.sqrt((x * x).sum(dim=-1, keepdim=True) + EPS)
