"""arena's trusted harness for AgentKernelArena's vllm/triton_logit_bias.

The task's own runner times each call with CUDA events around its launch (the host's launch
path included); arena's evaluator imports this file instead, makes the inputs from a secret
seed, runs the kernel in a process of its own, replays its calls as a CUDA graph and checks
every output (docs/trusted-evaluation.md). Shapes, input distributions (those of the task's
correctness: a permuted idx_mapping, bias and stop tokens), the reference and the tolerance
follow the task's scripts/task_runner.py; the kernel writes into logits (OUTPUT_ARGS).

Not covered: the allow-list (num_allowed_token_ids > 0), which the task's correctness checks
in one targeted case. Triton's interpreter cannot run that branch of the original (a loop over
a runtime vocab size), so ci/aka-harness-check.py could not check it on a CPU, and it has not
run on a GPU here: a kernel that drops the allow-list passes this harness.
"""
import torch

SOURCE = "source/triton_logit_bias.py"
ENTRY = "apply_logit_bias"
DEVICE = "cuda"
# (batch, vocab, max_bias_tokens), the task's TEST_SHAPES.
TEST_SHAPES = [(4, 256, 16), (8, 1024, 32), (16, 4096, 64), (32, 8192, 128), (64, 16384, 128)]
# apply_logit_bias(logits, idx_mapping, pos, num_allowed_token_ids, allowed_token_ids,
#                  num_logit_bias, logit_bias_token_ids, logit_bias, min_lens,
#                  num_stop_token_ids, stop_token_ids) writes into logits.
OUTPUT_ARGS = (0,)
ATOL = 1e-2
RTOL = 1e-2


def _distinct_tokens(g, batch, vocab, k):
    """k distinct token ids per row (the task draws a permutation per row)."""
    return torch.rand(batch, vocab, generator=g, device=DEVICE).topk(k, dim=1).indices.to(torch.int32)


def make_inputs(shape, seed):
    batch, vocab, max_bt = shape
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    i32 = dict(dtype=torch.int32, device=DEVICE)
    logits = torch.randn(batch, vocab, generator=g, device=DEVICE)
    idx_mapping = torch.randperm(batch, generator=g, device=DEVICE).to(torch.int32)
    pos = torch.randint(0, 16, (batch,), generator=g, dtype=torch.int64, device=DEVICE)
    num_allowed = torch.zeros(batch, **i32)
    allowed_ids = torch.zeros(batch, max_bt, **i32)
    num_bias = torch.full((batch,), min(5, max_bt), **i32)
    bias_token_ids = _distinct_tokens(g, batch, vocab, max_bt)
    bias_vals = torch.randn(batch, max_bt, generator=g, device=DEVICE)
    min_lens = torch.randint(1, 16, (batch,), generator=g, **i32)
    num_stop = torch.randint(0, min(max_bt, 8), (batch,), generator=g, **i32)
    stop_ids = _distinct_tokens(g, batch, vocab, max_bt)
    return (logits, idx_mapping, pos, num_allowed, allowed_ids, num_bias, bias_token_ids,
            bias_vals, min_lens, num_stop, stop_ids)


def reference(logits, idx_mapping, pos, num_allowed, allowed_ids, num_bias, bias_token_ids,
              bias_vals, min_lens, num_stop, stop_ids):
    # The allow-list is off (num_allowed is 0, as in the task's correctness).
    out = logits.clone()
    s = idx_mapping.long()
    j = torch.arange(bias_token_ids.shape[1], device=out.device)
    # Bias: the first num_bias[s] tokens of the row's state, each distinct.
    add = torch.where(j[None, :] < num_bias[s, None], bias_vals[s], 0.0)
    out.scatter_add_(1, bias_token_ids[s].long(), add)
    # Stop tokens are -inf while the request is shorter than its min_len.
    stop = (j[None, :] < num_stop[s, None]) & (pos < min_lens[s])[:, None]
    masked = torch.zeros_like(out, dtype=torch.bool)
    masked.scatter_(1, stop_ids[s].long(), stop)
    return out.masked_fill(masked, float("-inf"))


def check(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"got {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}")
    finite = torch.isfinite(want)
    if not torch.equal(torch.isfinite(got), finite):
        raise AssertionError(f"{int((torch.isfinite(got) ^ finite).sum().item())} logits differ in being -inf")
    if not torch.allclose(got[finite], want[finite], atol=ATOL, rtol=RTOL):
        err = (got[finite] - want[finite]).abs().max().item()
        raise AssertionError(f"max abs error {err:.3e} exceeds atol={ATOL}, rtol={RTOL}")
