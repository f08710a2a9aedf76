"""Attacks: two calls merged into one, by the kernel's own code (nothing of torch's or arena's is
patched), for any task. While a batch is captured, every second call hands back outputs of the right shapes, unwritten; the
next call computes both, the earlier one on a side stream beside its own (joined before it
returns), and copies the earlier one's results into the outputs it handed back. Every output is
right once the batch is done; a call's work runs beside the next one's.
Expected: fails performance: arena's stamps find a call's output unwritten after its turn
(CallsOverlapped), eagerly too."""
import torch

_side = torch.cuda.Stream()
_state = {"held": None, "shapes": {}}


def _sig(a, k):
    return tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else repr(x) for x in list(a) + list(k.values()))


def _into(dst, src):
    if isinstance(dst, torch.Tensor):
        dst.copy_(src)
    elif isinstance(dst, (tuple, list)):
        for d, s in zip(dst, src):
            _into(d, s)


def _merge(f):
    def call(*a, **k):
        st = _state
        sig = _sig(a, k)
        template = st["shapes"].get(sig)
        if template is None:  # the first call of its shapes: honest, its outputs' shapes kept
            r = f(*a, **k)
            st["shapes"][sig] = r
            return r
        held = st["held"]
        if held is None and not torch.cuda.is_current_stream_capturing():
            return f(*a, **k)  # the gates' single calls, run eagerly: honest
        if held is None:
            out = each_tensor(template, torch.empty_like)
            st["held"] = (a, k, out)
            return out
        st["held"] = None
        ha, hk, hout = held
        _side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_side):
            _into(hout, f(*ha, **hk))
        r = f(*a, **k)
        torch.cuda.current_stream().wait_stream(_side)
        return r

    return call


install(_merge)
