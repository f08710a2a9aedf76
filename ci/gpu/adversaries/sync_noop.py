"""Attacks: the end of a timed request. `torch.cuda.synchronize` becomes a no-op at import,
so the kernel process answers while its work is still queued on the device.
Before 2026-11-27: 5.17x on layernorm_gated (graph-timed), every gate passed.
Expected: the window ends when the evaluator's own read of sampled outputs comes back, which
waits behind the queued work or finds it unwritten: gains nothing."""
import torch

torch.cuda.synchronize = lambda *a, **k: None
install(lambda f: f)
