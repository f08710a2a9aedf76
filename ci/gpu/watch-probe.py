#!/usr/bin/env python3
"""What the evaluator's device watch (crates/arena-eval/trusted/arena_trusted/gpu_guard.py)
sees of another process's GPU work, on a real GPU: the evidence behind its busy limit.

A second process (another CUDA context, as a kernel process is) does one thing per scenario
while this one watches the device for WATCH_MS; each scenario runs REPS times, and a table gives
the longest gap between the watch's timer reads, how late it started and stopped, and the time
in gaps over the guard's threshold (median and max over the reps, in microseconds).

  idle            the other process does nothing
  self_busy       nothing either, but this process writes 100 MB and 2 000 small copies on its
                  own stream meanwhile (what the evaluator does while it watches)
  tiny            one 1-element kernel 10 ms into the watch
  sleep_1ms       a kernel that spins 1 ms, 10 ms into the watch
  sleep_50ms      a kernel that spins 50 ms, from 5 ms before the watch starts
  waitvalue       a stream that waits on a value in its own memory (cuStreamWaitValue32), a
                  5 ms kernel behind it; not released during the watch
  waitvalue_go    the same, released 10 ms into the watch (what precompute.py does when the
                  evaluator writes its inputs)
  gather          this process's gather of 64 words while the other runs a 5 ms kernel:
                  how long the read waits (the end of a batch whose work went on)

usage: python3 ci/gpu/watch-probe.py OUT.json [REPS] [WATCH_MS]
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "crates/arena-eval/trusted/arena_trusted"))

OTHER = r"""
import ctypes, sys, time, torch
cu = ctypes.CDLL("libcuda.so.1")
cu.cuStreamWaitValue32_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
cu.cuMemsetD32Async.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p]
torch.zeros(1, device="cuda"); torch.cuda._sleep(1000); torch.cuda.synchronize()
CYC = 1.98e9
word = torch.zeros(1, dtype=torch.int32, device="cuda")
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
def at(t0, dt):
    while time.perf_counter() < t0 + dt:
        pass
print("ready", flush=True)
for line in sys.stdin:
    name, t0 = line.split()
    t0 = float(t0)
    if name == "tiny":
        at(t0, 0.010); torch.ones(1, device="cuda").add_(1); torch.cuda.synchronize()
    elif name == "sleep_1ms":
        at(t0, 0.010); torch.cuda._sleep(int(0.001 * CYC)); torch.cuda.synchronize()
    elif name == "sleep_50ms":
        torch.cuda._sleep(int(0.050 * CYC)); torch.cuda.synchronize()
    elif name in ("waitvalue", "waitvalue_go"):
        a = word.data_ptr()
        cu.cuMemsetD32Async(a, 0xFFFFFFFF, 1, s1.cuda_stream)
        cu.cuStreamWaitValue32_v2(s1.cuda_stream, a, 0, 3)
        with torch.cuda.stream(s1):
            torch.cuda._sleep(int(0.005 * CYC))
        at(t0, 0.010 if name == "waitvalue_go" else 0.045)
        cu.cuMemsetD32Async(a, 0, 1, s2.cuda_stream)
        torch.cuda.synchronize()
    elif name == "gather":
        torch.cuda._sleep(int(0.005 * CYC)); torch.cuda.synchronize()
    print("done", flush=True)
"""


def main():
    out = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    watch_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
    import torch

    from gpu import Driver
    from gpu_guard import Guard

    cu = Driver()
    g = Guard(cu)
    big = torch.empty(100 << 20, dtype=torch.uint8, device="cuda")
    small = [torch.empty(4096, device="cuda") for _ in range(2000)]
    # Every kernel this process launches while it watches is loaded first: loading one
    # (CUDA's lazy loading) waits for the watch to end, which waits for this process.
    big.fill_(0)
    small[1].copy_(small[0])
    torch.cuda.synchronize()
    other = subprocess.Popen([sys.executable, "-c", OTHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline().strip() == "ready"
    results = {"device": torch.cuda.get_device_name(0), "idle_gather_us": round(g.idle_gather_s * 1e6, 1), "watch_ms": watch_ms, "scenarios": {}}
    scenarios = ["idle", "self_busy", "tiny", "sleep_1ms", "sleep_50ms", "waitvalue", "waitvalue_go", "gather"]
    for name in scenarios:
        rows = []
        for _ in range(reps):
            t0 = time.perf_counter()
            other.stdin.write(f"{name} {t0}\n")
            other.stdin.flush()
            if name == "gather":
                time.sleep(0.001)
                t = time.perf_counter()
                g.gather([g.own_word] * 64)
                rows.append({"gather_us": (time.perf_counter() - t) * 1e6})
                assert other.stdout.readline().strip() == "done"
                continue
            if name == "sleep_50ms":
                time.sleep(0.005)
            g.start()
            if name == "self_busy":
                big.fill_(1)
                for x in small:
                    x.copy_(small[0])
            while time.perf_counter() < t0 + watch_ms / 1000:
                pass
            torch.cuda.current_stream().synchronize()
            w = g.stop()
            rows.append(w.as_dict())
            assert other.stdout.readline().strip() == "done"
            torch.cuda.synchronize()
        keys = sorted(rows[0])
        summary = {k: {"median": round(statistics.median(r[k] for r in rows), 1), "max": round(max(r[k] for r in rows), 1)} for k in keys}
        results["scenarios"][name] = {"summary": summary, "rows": rows}
        cells = "  ".join(f"{k} {v['median']}/{v['max']}" for k, v in summary.items() if k in ("gap_us", "start_us", "stop_us", "over_us", "gather_us"))
        print(f"{name:13} {cells}", flush=True)
    other.stdin.close()
    other.wait(timeout=30)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
