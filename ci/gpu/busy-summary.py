#!/usr/bin/env python3
"""Summarizes ci/gpu/busy-run.sh's output: each task run's GPU, start and length,
arena's per-GPU busy line (report.json's `time.busy`), and the device's own utilization
(nvidia-smi's utilization.gpu, the share of each sample period a kernel ran) averaged per GPU
over the same span, from the first task run's start to the last one's end.

usage: ci/gpu/busy-summary.py OUT_DIR
"""
import collections
import datetime
import json
import sys



def perf_passed(r):
    """Whether the candidate's performance gate passed (a list of timed cases where it ran)."""
    perf = (r.get("candidate") or {}).get("performance")
    return bool(perf) and all(c.get("execution_time_ms") is not None for c in perf)


out = sys.argv[1]
results = json.load(open(f"{out}/results.json"))["tasks"]
runs = []
for r in results:
    t, g = r.get("timings") or {}, r.get("gpu") or {}
    if "started_unix_s" in t:
        runs.append((t["started_unix_s"], g.get("index"), t["total_s"], t.get("image_s", 0.0), r["task_id"], perf_passed(r)))
runs.sort()
if not runs:
    sys.exit("no task run says when it started")
first = runs[0][0]
last = max(s + total for s, _, total, _, _, _ in runs)
print(f"{len(runs)} task runs over {last - first:.1f} s")
for s, g, total, image, task, perf in runs:
    print(f"  gpu {g}  +{s - first:7.1f} s  {total:6.1f} s  image {image:5.1f} s  {task.split('/')[-1]}  performance {'pass' if perf else perf}")
busy = json.load(open(f"{out}/report.json"))["time"].get("busy")
if busy:
    for b in busy["gpus"]:
        print(f"arena: GPU {b['gpu']} busy {100 * b['busy']:.1f} % ({b['task_runs']} task runs, {b['held_s']:.1f} s held, {b['image_s']:.1f} s on images, span {busy['span_s']:.1f} s)")
util = collections.defaultdict(list)
for line in open(f"{out}/utilization.csv"):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 3:
        continue
    try:
        when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
        util[int(parts[1])].append((when, float(parts[2])))
    except ValueError:
        continue
for g, samples in sorted(util.items()):
    inside = [u for w, u in samples if first <= w <= last]
    active = sum(1 for u in inside if u > 0)
    if inside:
        print(f"device: GPU {g} utilization.gpu mean {sum(inside) / len(inside):.1f} %, a kernel running in {100 * active / len(inside):.1f} % of {len(inside)} samples")
