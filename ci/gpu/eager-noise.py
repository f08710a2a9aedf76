#!/usr/bin/env python3
"""Why an eager-timed task's untouched copies read 0.7-1.7 of themselves (docs/benchmarks.md,
2026-11-29: bincount through `arenactl run`): the launch path's cost per process, with and without
the process pinned to a CPU. No evaluator: each process is what a kernel process is in an eager
batch (fresh, Python launching one small kernel per call, the wall time of a batch over its
calls), stopped between batches as the evaluator stops it.

Per mode, PROCS fresh processes in pairs, each timing BATCHES batches of CALLS calls of a
small Triton kernel (one launch per call, like bincount's) after a warm-up; each process's
median µs per call, and each pair's ratio (first over second: what a paired untouched copy
reads). Modes:
- `free`: where the scheduler puts it (today's evaluator);
- `same`: both processes of a pair pinned to one CPU (the one the GPU's NUMA node lists
  first, else CPU 0);
- `apart`: the pair's processes pinned to two different CPUs, of different NUMA nodes where
  there are two.

usage: python3 ci/gpu/eager-noise.py OUT.json [PROCS] [CALLS] [BATCHES]
       (defaults 12, 2000, 5). Prints a table and writes OUT.json.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

CHILD = r'''
import os, sys, time
cpu, calls, batches = (int(a) for a in sys.argv[1:4])
if cpu >= 0:
    os.sched_setaffinity(0, {cpu})
import torch, triton, triton.language as tl

@triton.jit
def bump(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=m) + 1, mask=m)

x = torch.zeros(4096, device="cuda", dtype=torch.int32)
grid = (4,)
for _ in range(200):
    bump[grid](x, 4096, BLOCK=1024)
torch.cuda.synchronize()
print("ready", flush=True)
out = []
for _ in range(batches):
    sys.stdin.readline()  # the parent's go, after it stopped and resumed this process
    t = time.perf_counter()
    for _ in range(calls):
        bump[grid](x, 4096, BLOCK=1024)
    torch.cuda.synchronize()
    out.append(1e6 * (time.perf_counter() - t) / calls)
    print(repr(out[-1]), flush=True)
'''


def numa_cpus():
    """CPUs per NUMA node (the GPU's node first where sysfs says which), or [all CPUs]."""
    nodes = []
    base = "/sys/devices/system/node"
    for d in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if d.startswith("node") and d[4:].isdigit():
            cpus = []
            for part in open(os.path.join(base, d, "cpulist")).read().strip().split(","):
                lo, _, hi = part.partition("-")
                cpus += list(range(int(lo), int(hi or lo) + 1)) if lo else []
            nodes.append((int(d[4:]), [c for c in cpus if c in os.sched_getaffinity(0)]))
    gpu_node = None
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.split()[0].lower()
        bus = bus[4:] if len(bus) > 12 else bus  # 00000000:18:00.0 -> 0000:18:00.0
        gpu_node = int(open(f"/sys/bus/pci/devices/{bus}/numa_node").read())
    except (OSError, IndexError, ValueError):
        pass
    nodes = [n for n in nodes if n[1]] or [(0, sorted(os.sched_getaffinity(0)))]
    nodes.sort(key=lambda n: n[0] != gpu_node)
    return [c for _, c in nodes], gpu_node


def run_pair(cpus, calls, batches):
    """Two fresh processes on `cpus` (-1: unpinned), their batches alternated, each process
    stopped while the other runs (as the evaluator stops kernel processes)."""
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(c), str(calls), str(batches)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for c in cpus]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGSTOP)
    times = [[], []]
    for _ in range(batches):
        for j, p in enumerate(procs):
            p.send_signal(signal.SIGCONT)
            p.stdin.write("go\n")
            p.stdin.flush()
            times[j].append(float(p.stdout.readline()))
            p.send_signal(signal.SIGSTOP)
            time.sleep(0.05)
    for p in procs:
        p.send_signal(signal.SIGCONT)
        p.stdin.close()
        p.wait(30)
    return [statistics.median(t) for t in times]


def main():
    out = sys.argv[1]
    given = sys.argv[2:]
    procs, calls, batches = (int(given[i]) if i < len(given) else d for i, d in enumerate((12, 2000, 5)))
    nodes, gpu_node = numa_cpus()
    first = nodes[0][0]
    other = nodes[1][0] if len(nodes) > 1 else (nodes[0][1] if len(nodes[0]) > 1 else first)
    modes = {"free": [-1, -1], "same": [first, first], "apart": [first, other]}
    rows = {}
    for mode, cpus in modes.items():
        per, ratios = [], []
        for _ in range(max(1, procs // 2)):
            a, b = run_pair(cpus, calls, batches)
            per += [a, b]
            ratios.append(a / b)
        rows[mode] = {"cpus": cpus, "us_per_call": per, "pair_ratios": ratios}
        print(f"{mode:6} cpus {cpus}: µs/call {min(per):.1f}-{max(per):.1f} (median {statistics.median(per):.1f}); "
              f"pair ratios {min(ratios):.3f}-{max(ratios):.3f}", flush=True)
    with open(out, "w") as f:
        json.dump({"gpu_numa_node": gpu_node, "nodes": nodes, "calls": calls, "batches": batches, "modes": rows}, f, indent=1)


if __name__ == "__main__":
    main()
