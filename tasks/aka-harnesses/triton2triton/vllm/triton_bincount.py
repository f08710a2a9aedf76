"""arena's trusted harness for AgentKernelArena's vllm/triton_bincount.

The task's own runner times each call with CUDA events around its launch (the host's launch
path included); arena's evaluator imports this file instead, makes the inputs from a secret
seed, runs the kernel in a process of its own, replays its calls as a CUDA graph and checks
every output (docs/trusted-evaluation.md). Shapes, token distributions and the reference
follow the task's scripts/task_runner.py; the kernel writes the prompt bitmask and the output
counts into two of its arguments (OUTPUT_ARGS). Unlike the task's runner, the request states
are more than the batch (vLLM's buffers hold other requests too), in a random order, and the
buffers come holding garbage: a kernel must zero the rows of its batch and leave the others
alone, as the original does.
"""
import torch

SOURCE = "source/triton_bincount.py"
ENTRY = "bincount"
DEVICE = "cuda"
# (batch, seq_len, vocab), the task's TEST_SHAPES.
TEST_SHAPES = [(4, 128, 256), (8, 256, 512), (16, 512, 1024), (32, 1024, 2048), (64, 2048, 4096)]
# bincount(idx_mapping, all_token_ids, prompt_len, prefill_len, prompt_bin_mask,
#          output_bin_counts, max_prefill_len) writes the last two tensors.
OUTPUT_ARGS = (4, 5)
# Request states beyond the batch's, whose rows must come back untouched.
EXTRA_STATES = 4


def make_inputs(shape, seed):
    batch, seq_len, vocab = shape
    states = batch + EXTRA_STATES
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    i32 = dict(dtype=torch.int32, device=DEVICE)
    # Which request state each batch row is (vLLM's idx_mapping): distinct, in any order.
    idx_mapping = torch.randperm(states, generator=g, device=DEVICE)[:batch].to(torch.int32)
    all_token_ids = torch.randint(0, vocab, (states, seq_len), generator=g, **i32)
    prompt_len = torch.full((states,), seq_len // 2, **i32)
    prefill_len = torch.full((states,), seq_len, **i32)
    garbage = dict(generator=g, **i32)
    prompt_mask = torch.randint(-(2**31), 2**31, (states, (vocab + 31) // 32), **garbage)
    output_counts = torch.randint(-(2**31), 2**31, (states, vocab), **garbage)
    return idx_mapping, all_token_ids, prompt_len, prefill_len, prompt_mask, output_counts, seq_len


def reference(idx_mapping, all_token_ids, prompt_len, prefill_len, prompt_mask, output_counts, max_prefill_len):
    batch, seq_len = idx_mapping.shape[0], all_token_ids.shape[1]
    vocab = output_counts.shape[1]
    words = prompt_mask.shape[1]
    states = idx_mapping.long()
    pos = torch.arange(seq_len, device=all_token_ids.device)
    tokens = all_token_ids[states].long()
    in_prompt = pos[None, :] < prompt_len[states, None]
    in_output = (pos[None, :] >= prompt_len[states, None]) & (pos[None, :] < prefill_len[states, None])
    # The prompt's tokens as bits of 32-bit words (bit 31 wraps to the sign, as int32 does).
    seen = torch.zeros(batch, words * 32, dtype=torch.int64, device=tokens.device)
    seen.scatter_add_(1, tokens, in_prompt.long())
    present = (seen > 0).long().view(batch, words, 32)
    packed = (present << torch.arange(32, device=tokens.device)).sum(-1)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
    counts = torch.zeros(batch, vocab, dtype=torch.int64, device=tokens.device)
    counts.scatter_add_(1, tokens, in_output.long())
    want_mask = prompt_mask.clone()
    want_counts = output_counts.clone()
    want_mask[states] = packed
    want_counts[states] = counts.to(torch.int32)
    return want_mask, want_counts


def check(got, want):
    if not isinstance(got, tuple) or len(got) != 2:
        raise AssertionError("expected the prompt bitmask and the output counts")
    for name, g, w in zip(("prompt_bin_mask", "output_bin_counts"), got, want):
        if g.shape != w.shape or g.dtype != w.dtype:
            raise AssertionError(f"{name}: got {tuple(g.shape)} {g.dtype}, expected {tuple(w.shape)} {w.dtype}")
        if not torch.equal(g, w):
            raise AssertionError(f"{name}: {int((g != w).sum().item())} entries differ")
