"""Attacks: the kernel process's own request handler (it shares the interpreter with the
kernel). The replay handler answers as soon as the graph is queued, and the eager path's
final synchronize is dropped, so a timed request is answered before the work is done.
Before 2026-11-27: 4.55x on layernorm_gated.
Expected: the evaluator reads sampled outputs itself before the window closes: gains nothing."""
import gpu  # the evaluator's own file beside child.py: its class, patched here for this process

_c = child()


def _replay(msg):
    _c.graph.replay()
    return {}


_c.replay = _replay
gpu.ChildSide.synchronize = lambda self: None
install(lambda f: f)
