"""Times the steps a Triton task's harness is made of, one process each: Python's start, the
imports of torch and triton, CUDA's initialisation, a C compile (Triton builds launcher stubs
with the system compiler), then the task's three gates. Run inside an arena container (as the
agent of ci/gpu/step-times.toml) and directly on the host, it shows where a container's time
differs from the host's. Prints one JSON object on stdout.
usage: python3 step-times.py TASK_DIR [REPS]"""
import json, os, subprocess, sys, tempfile, time

task = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
steps = {
    "python": ["python3", "-c", "pass"],
    "import_torch": ["python3", "-c", "import torch"],
    "import_triton": ["python3", "-c", "import triton"],
    "cuda_init": ["python3", "-c", "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"],
    "cc": ["sh", "-c", "echo 'int main(void){return 0;}' | cc -x c - -o /tmp/arena-cc-probe"],
    "gcc_python_ext": ["sh", "-c", "printf '#include <Python.h>\\nint main(void){return 0;}' | gcc -x c - -I/usr/include/python3.12 -c -o /tmp/arena-cc-probe.o"],
}
out = {"where": os.environ.get("ARENA_TASK_ID") and "container" or "host", "steps": {}}
for name, cmd in steps.items():
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        ok = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode == 0
        times.append(time.perf_counter() - t if ok else None)
    out["steps"][name] = times
env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp())
for gate in ("compile", "correctness", "performance"):
    t = time.perf_counter()
    subprocess.run(["python3", "scripts/task_runner.py", gate], cwd=task, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out["steps"][gate] = [time.perf_counter() - t]
print(json.dumps(out))
