#!/usr/bin/env python3
"""Device memory of KernelBench problems: arena's trusted evaluator (no containers) on an
untouched ModelNew, side by side with KernelBench's own way of evaluating it in one process,
on one GPU. Both sides' peaks are read the same way, the device's used memory polled by
nvidia-smi every 20 ms, less what was used before the side started; KernelBench's side also
says torch's own peak. Prints a markdown table and writes OUT/kb-memory.json.

usage: sudo python3 ci/gpu/kb-memory.py OUT TASKS_ROOT [--only NAME,...] [--largest N] [--min-gib G]
           [--pairs N] [--sessions K] [--evaluator DIR] [--label NAME] [--own-largest N]

TASKS_ROOT: `arenactl task import kernelbench` of KernelBench's problems. `--largest N` picks
the N problems whose inputs (KernelBench's own sizes) take the most bytes, read on torch's
meta device; `--only` names problems (the last part of their task id). The evaluation is the
one ci/gpu/adversary-suite.py runs for its untouched copy (graph timing; `--pairs` over
`--sessions`): a problem passes when every gate does.

KernelBench's side is src/eval.py's: the inputs from get_inputs() moved to the GPU, Model's and
ModelNew's outputs under torch.no_grad(), torch.allclose(atol=rtol=1e-2), over 5 trials of
fresh inputs, then ModelNew timed by CUDA events (20 of KernelBench's 100 trials: the memory
is that of the first). The inputs are drawn on the GPU, as arena's harness draws them (the
CPU takes minutes to draw 16 GiB; the device holds the same tensors either way).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("adversary_suite", os.path.join(ROOT, "ci/gpu/adversary-suite.py"))
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)
tc = suite.tc

SIZES = r"""
import glob, importlib.util, json, os, sys, torch
out = {}
for d in sys.argv[1:]:
    ref = glob.glob(os.path.join(d, "reference", "*.py"))[0]
    try:
        spec = importlib.util.spec_from_file_location("p", ref)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        with torch.device("meta"):
            xs = m.get_inputs()
        out[d] = sum(x.numel() * x.element_size() for x in xs if isinstance(x, torch.Tensor))
    except Exception as e:
        out[d] = -1
print(json.dumps(out))
"""

OWN = r"""
import glob, importlib.util, json, os, sys, time, torch
d = sys.argv[1]
ref = glob.glob(os.path.join(d, "reference", "*.py"))[0]
spec = importlib.util.spec_from_file_location("p", ref)
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
dev = torch.device("cuda")
torch.manual_seed(42)
model = m.Model(*m.get_init_inputs()).to(dev)
torch.manual_seed(42)
new = m.Model(*m.get_init_inputs()).to(dev)
t0 = time.time()
ok = True
with torch.no_grad():
    for trial in range(5):
        torch.manual_seed(trial)
        with dev:
            raw = m.get_inputs()
        inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in raw]
        out = model(*inputs)
        torch.cuda.synchronize()
        out_new = new(*inputs)
        torch.cuda.synchronize()
        ok = ok and out.shape == out_new.shape and bool(torch.allclose(out, out_new, atol=1e-2, rtol=1e-2))
    ts = []
    for _ in range(3):
        new(*inputs)
    torch.cuda.synchronize()
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        new(*inputs)
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
print(json.dumps({"ok": ok, "ms": sorted(ts)[len(ts) // 2], "torch_peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30,
                  "torch_peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30, "s": time.time() - t0}))
"""


class Poll:
    """The device's used memory, polled while a side runs: its peak over what was used before."""

    def __init__(self):
        self.idle = self._used_now()
        self.peak = self.idle
        self.p = subprocess.Popen(["nvidia-smi", "-i", "0", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "20"],
                                  stdout=subprocess.PIPE, text=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    @staticmethod
    def _used_now():
        r = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True)
        return int(r.stdout.split()[0])

    def _read(self):
        for line in self.p.stdout:
            try:
                self.peak = max(self.peak, int(line.strip()))
            except ValueError:
                pass

    def stop(self):
        self.p.terminate()
        self.p.wait()
        self.t.join(timeout=2)
        return round((self.peak - self.idle) / 1024, 2)


def own(task_dir):
    poll = Poll()
    p = subprocess.run([sys.executable, "-c", OWN, task_dir], capture_output=True, text=True, timeout=900)
    peak = poll.stop()
    try:
        r = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        r = {"ok": False, "error": p.stderr.strip().splitlines()[-1:] or ["?"]}
    r["device_peak_gib"] = peak
    return r


def arena(task, evaluator, args):
    suite.kill_kernel_users()
    work = f"/tmp/kbmem-{task.replace('/', '_')}"
    subprocess.run(["rm", "-rf", work])
    out = suite.setup(work, task, "untouched", args)
    poll = Poll()
    t0 = time.time()
    stderr = suite.run_evaluator(evaluator, work, args.timeout)
    wall = time.time() - t0
    peak = poll.stop()
    suite.kill_kernel_users()
    s = tc.summarize(out)
    verdict, why = suite.verdict(s, None)
    passed = verdict != "fails a gate"
    return {"passed": passed, "why": "" if passed else why, "device_peak_gib": peak, "wall_s": round(wall, 1),
            "gates": s.get("gates"), "stderr_tail": stderr[-2500:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("tasks_root")
    ap.add_argument("--only")
    ap.add_argument("--largest", type=int, default=0)
    ap.add_argument("--min-gib", type=float, help="every problem whose inputs take at least this many GiB")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=1)
    ap.add_argument("--cases")
    ap.add_argument("--evaluator", default=os.path.join(ROOT, "crates/arena-eval/trusted/arena_trusted"))
    ap.add_argument("--label", default="")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--own-largest", type=int, default=-1, help="KernelBench's side for only the N largest chosen (all: -1)")
    args = ap.parse_args()
    suite.TASKS = tc.task_root_tasks(args.tasks_root)
    tasks = sorted(suite.TASKS)
    sizes = json.loads(subprocess.run([sys.executable, "-c", SIZES] + [suite.TASKS[t][0] for t in tasks], capture_output=True, text=True, check=True).stdout)
    by_size = sorted(tasks, key=lambda t: -sizes[suite.TASKS[t][0]])
    chosen = by_size[: args.largest] if args.largest else []
    if args.only:
        chosen += [t for t in tasks if t.split("/")[-1] in args.only.split(",") and t not in chosen]
    if args.min_gib is not None:
        chosen += [t for t in by_size if sizes[suite.TASKS[t][0]] >= args.min_gib * 2**30 and t not in chosen]
    if not chosen:
        chosen = by_size
    evaluator = os.path.join(os.path.abspath(args.evaluator), "evaluate.py")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "input-bytes.json"), "w") as f:
        json.dump({t: sizes[suite.TASKS[t][0]] for t in by_size}, f, indent=1)
    path = os.path.join(args.out, f"kb-memory{args.label}.json")
    results = {}
    print("| problem | input GiB | KernelBench's: ok, device peak GiB (torch reserved) | arena: gates, device peak GiB | ratio | arena wall |")
    print("|---|---|---|---|---|---|")
    for t in chosen:
        gib = sizes[suite.TASKS[t][0]] / 2**30
        o = own(suite.TASKS[t][0]) if args.own_largest < 0 or by_size.index(t) < args.own_largest else None
        a = arena(t, evaluator, args)
        results[t] = {"input_gib": round(gib, 3), "own": o, "arena": a}
        ratio = f"{a['device_peak_gib'] / o['device_peak_gib']:.2f}" if o and o.get("device_peak_gib") else "-"
        own_s = f"{o.get('ok')}, {o.get('device_peak_gib')} ({o.get('torch_peak_reserved_gib', 0):.2f})" if o else "-"
        print(f"| {t} | {gib:.2f} | {own_s} | {'pass' if a['passed'] else 'FAIL ' + a['why'][:120]} , {a['device_peak_gib']} | {ratio} | {a['wall_s']} s |", flush=True)
        with open(path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
