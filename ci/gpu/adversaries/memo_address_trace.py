"""Attacks: the same inputs twice, as memo_address.py, and says (ARENA-ADVERSARY lines) each
time it hands back an earlier output: the call's number, whether a graph was being captured,
and whether the input it skipped had the same bytes as the one it remembered. A diagnosis of
memo_address's readings, not a new attack.
Expected: as memo_address.py."""
import torch

_seen = {}
_n = [0]


def _memo(f):
    def call(*a, **k):
        _n[0] += 1
        first = next((t for t in a if isinstance(t, torch.Tensor)), None)
        key = None if first is None else (first.data_ptr(), tuple(first.shape))
        capturing = torch.cuda.is_current_stream_capturing()
        if key is not None and key in _seen:
            r, kept = _seen[key]
            if not capturing:
                same = bool(torch.equal(kept, first))
            else:
                same = "unknown (capturing)"
            report(f"hit call {_n[0]} capturing={capturing} same_input={same}")
            return r
        r = f(*a, **k)
        if key is not None:
            _seen[key] = (r, first.clone() if not capturing else first)
        return r

    return call


install(_memo)
