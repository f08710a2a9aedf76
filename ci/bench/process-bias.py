#!/usr/bin/env python3
"""How much two processes of identical code differ in speed (docs/benchmarks.md, "Process-level
bias of CPU kernels"): pairs of Python processes run the sample matmul kernel, 20 interleaved
batches each in random order, and each process pair's median ratio is printed, for processes as
started, with ASLR off (setarch -R), with ASLR off and PYTHONHASHSEED=0, and both pinned to CPU 1.

usage: python3 ci/bench/process-bias.py [PAIRS_PER_ROW]   (default 10; about a minute)
"""
import os
import random
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.path.join(HERE, "../../tasks/python2python/arena/matmul/source/matmul.py")
WORKER = r"""
import importlib.util, random, sys, time
spec = importlib.util.spec_from_file_location("k", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
rng = random.Random(1)
n = 48
a = [[rng.random() for _ in range(n)] for _ in range(n)]
b = [[rng.random() for _ in range(n)] for _ in range(n)]
for _ in sys.stdin:
    t = time.perf_counter_ns()
    for _ in range(5):
        m.matmul(a, b)
    print((time.perf_counter_ns() - t) / 1e6, flush=True)
"""


def process_pair(prefix, env):
    argv = prefix + [sys.executable, "-c", WORKER, KERNEL]
    ps = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
          for _ in range(2)]
    ratios = []
    for _ in range(20):
        order = [0, 1]
        random.shuffle(order)
        t = [0.0, 0.0]
        for i in order:
            ps[i].stdin.write("go\n")
            ps[i].stdin.flush()
            t[i] = float(ps[i].stdout.readline())
        ratios.append(t[0] / t[1])
    for p in ps:
        p.stdin.close()
        p.wait()
    return statistics.median(ratios)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    hash0 = dict(os.environ, PYTHONHASHSEED="0")
    for name, prefix, env in [
        ("as started", [], None),
        ("ASLR off", ["setarch", "-R"], None),
        ("ASLR off, PYTHONHASHSEED=0", ["setarch", "-R"], hash0),
        ("both pinned to CPU 1", ["taskset", "-c", "1"], None),
    ]:
        rs = [process_pair(prefix, env) for _ in range(n)]
        print(f"{name}: " + " ".join(f"{r:.3f}" for r in rs)
              + f"  spread {max(rs) - min(rs):.3f}  sd {statistics.stdev(rs):.4f}")


if __name__ == "__main__":
    main()
