"""Attacks: a check that passes zeros (outputs smaller than the task's tolerance: six of vLLM's
derived tasks, write_zeros_to_output rightly). Its first call computes, to learn the outputs'
shapes; every later call returns zeros of those shapes and computes nothing.
Expected: where the task's check tells zeros apart, a gate fails (wrong output); where it
passes them, the correctness gate's zeros probe credits no speedup on that configuration
(`tolerance_admits_zeros`, admits.py): no gain either way."""
import torch

_first = {}


def _nothing(f):
    def call(*a, **k):
        if "out" not in _first:
            _first["out"] = f(*a, **k)
            return _first["out"]
        return each_tensor(_first["out"], torch.zeros_like)

    return call


install(_nothing)
