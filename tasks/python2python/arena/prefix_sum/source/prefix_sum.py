"""Inclusive prefix sum of a list of integers.

Baseline: correct, deliberately unoptimized (one interpreted loop iteration per element,
with indexing on both lists).
"""


def prefix_sum(xs):
    """Return [xs[0], xs[0] + xs[1], ...] as a new list."""
    out = [0] * len(xs)
    total = 0
    for i in range(len(xs)):
        total = total + xs[i]
        out[i] = total
    return out
