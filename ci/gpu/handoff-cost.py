#!/usr/bin/env python3
"""What a per-call handoff between the evaluator and a kernel costs on a GPU (batch-and-skip). A kernel that sees a whole timed batch's inputs can compute every call in one
launch (ci/gpu/adversaries/batch_skip.py); only a window in which call j's inputs do not exist
until call j-1's outputs do stops it, and on a time-sliced GPU the only party that can hold
them back without sharing the kernel's context is the host. This measures, for a one-launch
row-normalizing Triton kernel (AgentKernelArena's fla_l2norm's shape class) on N calls:

  graph      N calls captured in one CUDA graph and replayed: arena's timing today.
  batched    one launch over every call's rows: what batch_skip reads.
  gated      each call waits on the GPU (cuStreamWaitValue32) for a host-memory word the host
             sets once the previous call has written its own word (cuStreamWriteValue32): the
             cheapest handoff there is, a host thread in the same process spinning, no check.
  gated+out  the same, and each call's output copied to pinned host memory before its word,
             the host reading one element of it before it lets the next call go: the least an
             evaluator needs to know the call was done.

Per-call microseconds (median of REPS), and each line against `graph`.

usage: python3 ci/gpu/handoff-cost.py [N] [REPS] [ROWS] [COLS]
"""
import ctypes
import faulthandler
import statistics
import sys
import threading
import time

import torch
import triton
import triton.language as tl

N = int(sys.argv[1]) if len(sys.argv) > 1 else 512
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 7
GATED = min(N, 128)
ROWS = int(sys.argv[3]) if len(sys.argv) > 3 else 32
COLS = int(sys.argv[4]) if len(sys.argv) > 4 else 512


@triton.jit
def l2norm(x, y, cols: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, cols)
    v = tl.load(x + row * cols + offs).to(tl.float32)
    r = tl.rsqrt(tl.sum(v * v, axis=0) + 1e-6)
    tl.store(y + row * cols + offs, v * r)


cu = ctypes.CDLL("libcuda.so.1")


def fn(*names):
    for n in names:
        try:
            return getattr(cu, n)
        except AttributeError:
            pass
    raise AttributeError(names)


wait_value = fn("cuStreamWaitValue32_v2", "cuStreamWaitValue32")
write_value = fn("cuStreamWriteValue32_v2", "cuStreamWriteValue32")
for f in (wait_value, write_value):
    f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
host_dev_ptr = fn("cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer")
host_dev_ptr.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
copy_d2h = fn("cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync")
copy_d2h.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
GEQ = 0x0


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: CUresult {rc}")


def dev(ptr):
    d = ctypes.c_uint64()
    check(host_dev_ptr(ctypes.byref(d), ptr, 0), "cuMemHostGetDevicePointer")
    return d.value


x = torch.randn(N, ROWS, COLS, device="cuda")
y = torch.empty_like(x)
want = x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)
stream = torch.cuda.Stream()
step = ROWS * COLS


def one(j):
    l2norm[(ROWS,)](x[j], y[j], COLS)


def graph_time():
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        one(0)
        stream.synchronize()
        with torch.cuda.graph(g, stream=stream):
            for j in range(N):
                one(j)
    out = []
    for _ in range(REPS):
        y.zero_()
        torch.cuda.synchronize()
        t = time.perf_counter_ns()
        g.replay()
        torch.cuda.synchronize()
        out.append((time.perf_counter_ns() - t) / 1e3 / N)
        assert torch.allclose(y, want, atol=1e-5)
    return out


def batched_time():
    out = []
    for _ in range(REPS):
        y.zero_()
        torch.cuda.synchronize()
        t = time.perf_counter_ns()
        l2norm[(N * ROWS,)](x, y, COLS)
        torch.cuda.synchronize()
        out.append((time.perf_counter_ns() - t) / 1e3 / N)
        assert torch.allclose(y, want, atol=1e-5)
    return out


flags = torch.zeros(64, dtype=torch.int32, pin_memory=True)
go = ctypes.c_int32.from_address(flags.data_ptr())
done = ctypes.c_int32.from_address(flags.data_ptr() + 64)
go_dev, done_dev = dev(flags.data_ptr()), dev(flags.data_ptr() + 64)
seen = torch.zeros(N, ROWS, COLS, pin_memory=True)
seen_dev = dev(seen.data_ptr())


def gated_time(with_output):
    """Every call is queued before the first is let go: at most GATED calls, so that the
    queue (wait, launch, copy, write per call) never fills while the host has not started."""
    out = []
    h = stream.cuda_stream
    n = GATED
    for _ in range(REPS):
        y.zero_()
        seen.fill_(float("nan"))
        go.value, done.value = 0, 0
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            for j in range(n):
                check(wait_value(h, go_dev, j + 1, GEQ), "cuStreamWaitValue32")
                one(j)
                if with_output:
                    check(copy_d2h(seen.data_ptr() + 4 * step * j, y[j].data_ptr(), 4 * step, h), "cuMemcpyDtoHAsync")
                check(write_value(h, done_dev, j + 1, 0), "cuStreamWriteValue32")
        # Everything is queued; the GPU waits for the first word.
        t = time.perf_counter_ns()
        for j in range(n):
            go.value = j + 1
            while done.value != j + 1:
                pass
            if with_output:
                v = seen[j, ROWS - 1, COLS - 1].item()
                if v != v:
                    raise RuntimeError(f"call {j}'s output had not arrived")
        out.append((time.perf_counter_ns() - t) / 1e3 / n)
        torch.cuda.synchronize()
        assert torch.allclose(y[:n], want[:n], atol=1e-5)
    return out


# A queue that filled before the host let the first call go would wait forever.
faulthandler.dump_traceback_later(240, exit=True)
print(torch.cuda.get_device_name(0), "torch", torch.__version__, "triton", triton.__version__)
print(f"{N} calls ({GATED} where gated) of l2norm over {ROWS}x{COLS} fp32 ({4 * step // 1024} KiB in, the same out), {REPS} reps")
lines = [("graph", graph_time()), ("batched", batched_time()), ("gated", gated_time(False)), ("gated+out", gated_time(True))]
base = statistics.median(lines[0][1])
for name, ts in lines:
    m = statistics.median(ts)
    print(f"{name:10s} {m:8.2f} us per call  (reps {min(ts):.2f}-{max(ts):.2f})  {m / base:6.2f}x graph")
