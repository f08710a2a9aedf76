"""arena's trusted harness for AgentKernelArena's vllm/triton_apply_grammar_bitmask.

The task's own runner times each call with CUDA events around its launch (the host's launch
path included); arena's evaluator imports this file instead, makes the inputs from a secret
seed, runs the kernel in a process of its own, replays its calls as a CUDA graph and checks
every output (docs/trusted-evaluation.md). Shapes, the logits' distribution and the
reference follow the task's scripts/task_runner.py; the kernel masks logits in place
(OUTPUT_ARGS). Unlike the task's runner, the masked rows are a random choice in a random
order, and every bit of the bitmask is random (the runner's never sets bit 31).
"""
import torch

SOURCE = "source/triton_apply_grammar_bitmask.py"
ENTRY = "apply_grammar_bitmask"
DEVICE = "cuda"
# (num_masks, vocab_size), the task's TEST_SHAPES.
TEST_SHAPES = [(4, 1024), (8, 4096), (16, 8192), (32, 32000), (64, 65536)]
# apply_grammar_bitmask(logits, logits_indices, bitmask, vocab_size) writes into logits.
OUTPUT_ARGS = (0,)
# Rows beyond the masked ones, which must come back unchanged (the task's correctness has 4).
EXTRA_ROWS = 4


def make_inputs(shape, seed):
    num_masks, vocab = shape
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    rows = num_masks + EXTRA_ROWS
    logits = torch.randn(rows, vocab, generator=g, device=DEVICE)
    # Which logits row each bitmask row masks: distinct rows, in a random order.
    logits_indices = torch.randperm(rows, generator=g, device=DEVICE)[:num_masks].to(torch.int32)
    words = (vocab + 31) // 32
    # Every bit of every word random (the sign bit included: token 31 of each word).
    bitmask = torch.randint(-(2**31), 2**31, (num_masks, words), generator=g, device=DEVICE, dtype=torch.int32)
    return logits, logits_indices, bitmask, vocab


def reference(logits, logits_indices, bitmask, vocab):
    out = logits.clone()
    v = torch.arange(vocab, device=logits.device)
    allowed = ((bitmask[:, v // 32].long() >> (v % 32)) & 1).bool()
    rows = logits_indices.long()
    out[rows, :vocab] = torch.where(allowed, out[rows, :vocab], float("-inf"))
    return out


def check(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"got {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}")
    # Masked entries are -inf and the others untouched: exactly.
    if not torch.equal(got, want):
        bad = int((got != want).sum().item())
        raise AssertionError(f"{bad} logits differ from the masked reference")
