"""The device's floor: python3 -I -B floor.py (prints one JSON line)

How long the cheapest call on this machine takes, measured in the evaluator container by
arena's code (as a user of its own, with the image's own PyTorch where it has one): no kernel
call can honestly take less, so a reported time below the floor is refused. On a GPU the
cheapest call is one tiny kernel; it is timed the cheapest way a harness can time it (replay
of a captured CUDA/HIP graph of many launches, per launch) and the plain way (events around
one launch). Without a GPU it is an empty Python call.
"""
import json
import time


def cpu_call_ms(n=200000):
    def f():
        return None

    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter_ns() - t0) / n / 1e6)
    return best


def gpu(torch):
    x = torch.zeros(1, device="cuda")
    for _ in range(20):
        x.add_(1)
    torch.cuda.synchronize()
    launches = 200
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph):
            for _ in range(launches):
                x.add_(1)
    torch.cuda.synchronize()
    graph_ms = []
    for _ in range(20):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        graph_ms.append(a.elapsed_time(b) / launches)
    event_ms = []
    for _ in range(50):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        x.add_(1)
        b.record()
        b.synchronize()
        event_ms.append(a.elapsed_time(b))
    return {
        "device": torch.cuda.get_device_name(0),
        "graph_launch_ms": min(graph_ms),
        "event_launch_ms": min(event_ms),
    }


def main():
    out = {"cpu_call_ms": cpu_call_ms()}
    try:
        import torch
    except Exception as e:  # a CPU image without PyTorch
        out["gpu"] = None
        out["why"] = f"no PyTorch ({type(e).__name__})"
    else:
        out["torch"] = torch.__version__
        if torch.cuda.is_available():
            out["gpu"] = gpu(torch)
        else:
            out["gpu"] = None
            out["why"] = "no GPU visible to PyTorch"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
