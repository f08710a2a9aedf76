"""Matrix product C = A · B of integer matrices given as lists of rows.

Baseline: correct, deliberately unoptimized (the textbook i-j-k triple loop with indexing).
"""


def matmul(a, b):
    """A is M×K, B is K×N; return the M×N product as a new list of lists."""
    m = len(a)
    k = len(b)
    n = len(b[0]) if k else 0
    c = [[0] * n for _ in range(m)]
    for i in range(m):
        for j in range(n):
            acc = 0
            for p in range(k):
                acc += a[i][p] * b[p][j]
            c[i][j] = acc
    return c
