"""Sum of squares, optimized: the multiply and the sum run in C (map over operator.mul)."""
from operator import mul


def sum_squares(xs):
    return sum(map(mul, xs, xs))
