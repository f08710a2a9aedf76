"""Sum of the squares of a list of integers.

Baseline: correct, deliberately unoptimized (one interpreted loop iteration per element,
with indexing).
"""


def sum_squares(xs):
    """Return xs[0]**2 + xs[1]**2 + ... as an int."""
    total = 0
    for i in range(len(xs)):
        total = total + xs[i] * xs[i]
    return total
