"""One evaluation of arena's trusted evaluator (evaluate.py is its entry, serve.py the warm
one's): the harness and configurations of a job, the kernel processes, the gates in order, and
the record and reports they leave in the job's `out`. See docs/trusted-evaluation.md.
"""
import ast
import importlib.util
import json
import os
import platform
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from data import CpuData  # noqa: E402
from deadline import Deadline  # noqa: E402
from kernel import Kernel, KernelFailed  # noqa: E402
from measure import Session, out_of_memory  # noqa: E402
import memory_blame  # noqa: E402
import outcomes  # noqa: E402
import simulated  # noqa: E402
from zygote import Zygote  # noqa: E402


def process_age():
    """Seconds since this process started (its interpreter's start-up included), from
    /proc; None where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def add_phase(record, name, seconds):
    """Where the evaluator's time outside its gates went (`phases_s`): the runner's
    breakdown names it, so that a task run's overhead can be told from its evaluation."""
    phases = record.setdefault("phases_s", {})
    phases[name] = round(phases.get(name, 0.0) + seconds, 4)


def write_json(out, name, value):
    tmp = os.path.join(out, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(tmp, os.path.join(out, name))


def configs_of(job, harness):
    hidden = job.get("hidden")
    if not hidden:
        return [(s, "visible") for s in harness.shapes], False
    with open(hidden) as f:
        sealed = json.load(f)
    return [(ast.literal_eval(c["entry"]), c["category"]) for c in sealed["configs"]], True


def child_env(job, role, compiled=False):
    scratch = job["scratch"][role]
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": scratch,
        "TRITON_CACHE_DIR": os.path.join(scratch, ".triton"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for k in job.get("pass_env", []):
        if k in os.environ:
            env[k] = os.environ[k]
    # torch's device memory from the virtual memory API, which shares it only by file
    # descriptor: a process exports nothing another can open by guessing (driver.py). A
    # setting of the host's own comes first; this one, last, holds.
    alloc = env.get("PYTORCH_CUDA_ALLOC_CONF")
    env["PYTORCH_CUDA_ALLOC_CONF"] = f"{alloc},expandable_segments:True" if alloc else "expandable_segments:True"
    if compiled:
        # torch.compile compiles in this process: no pool of worker processes that would
        # outlive the evaluation's timing (and stay behind as the original's user). Its cache
        # goes to the scratch, named without asking the user database (which has no entry
        # for a kernel's user: getpass.getuser() reads USER first).
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, ".inductor")
        env["USER"] = f"arena{job['users'][role]['uid']}"
    return env


COMPILED = "compiled"


def compiled_baseline(job, harness, roles):
    """torch.compile's options for a baseline of the original compiled (the harness's
    COMPILED_BASELINE, KernelBench's second speedup column), in a paired evaluation of the
    visible configurations whose job has a user for it (COMPILED: a user of its own, so
    that it is stopped, timed and cleaned up apart from the eager original); else None."""
    opts = harness.compiled_baseline
    if opts is None or len(roles) != 2 or job.get("unseen") or COMPILED not in job.get("users", {}):
        return None
    return opts


def pick_modules(preload, present, device):
    """What the zygote loads: `preload` (the harness's PRELOAD) where given, else PyTorch
    where `present` holds it, and Triton too on a GPU; Triton only on a GPU."""
    modules = preload
    if modules is None:
        modules = [m for m in ("torch", "triton") if m in present]
        if "torch" in modules and device == "cuda" and importlib.util.find_spec("triton"):
            modules.append("triton")
    return sorted({str(m) for m in modules} - ({"triton"} if device != "cuda" else set()))


def zygote_modules(harness):
    """pick_modules once the harness is loaded: what it (or the evaluator's set-up for its
    device) imported."""
    return pick_modules(getattr(harness.module, "PRELOAD", None), sys.modules, harness.device)


def zygote_env(job):
    return {k: v for k, v in child_env(job, job["roles"][0]).items() if k not in ("HOME", "TMPDIR", "TRITON_CACHE_DIR")}


def modules_named(path, accelerator):
    """pick_modules as the harness's text reads, before it is run: its PRELOAD literal, the
    modules its body imports (and PyTorch on a GPU, which the evaluator's set-up imports), the
    device from its DEVICE or DEVICES literal. A guess: None where the text does not say."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
        lits, imported = {}, set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    lits[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    pass
            elif isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
        device = lits.get("DEVICE", "cpu")
        if "DEVICES" in lits:
            have = ["cuda", "cpu"] if accelerator else ["cpu"]
            device = next((d for d in lits["DEVICES"] if d in have), None)
        if device not in ("cpu", "cuda"):
            return None
        if device == "cuda":
            imported.add("torch")
        return pick_modules(lits.get("PRELOAD"), imported, device)
    except Exception:  # a guess only: whatever the text holds, the harness decides when loaded
        return None


def early_zygote(job):
    """A zygote started before the harness is loaded, so that its imports (seconds of
    PyTorch) run beside the evaluator's own: with the modules the harness's text names
    (modules_named). zygote_for keeps it only where they are the ones it picks."""
    if not job.get("zygote", True):
        return None
    modules = modules_named(job["harness"], job.get("accelerator", True))
    if modules is None:
        return None
    try:
        return Zygote(modules, zygote_env(job))
    except OSError:
        return None


def zygote_for(job, harness, early=None):
    """The zygote that forks this evaluator's kernel processes (zygote.py), with what their
    kernels import first already loaded (zygote_modules): `early` where it loads just that,
    else a new one. None where the job says to start each process afresh."""
    modules = zygote_modules(harness) if job.get("zygote", True) else None
    if early is not None and early.modules == modules:
        return early
    if early is not None:
        early.close()
    return None if modules is None else Zygote(modules, zygote_env(job))


def make_data(job, harness):
    if harness.device == "cuda":
        from gpu import GpuData  # noqa: E402

        return GpuData(job)
    return CpuData()


def new_record(harness=None):
    record = {"mode": "trusted", "python": platform.python_version(), "warnings": [], "gate_s": {}}
    if harness is not None:
        record["device"] = harness.device
    return record


def unseen(s, kernels, out, gates, record):
    """Both kernels on the hidden configurations: each configuration judged for each kernel on
    its own; times, paired, where both pass them all. Errors name configurations by index.
    Where the device's memory ran out and the judged kernel held it (memory_verdict), the
    configurations not yet judged fail for it, and nothing is timed."""
    report = {"compiled": {}, "passed": {}, "errors": {}, "cases": []}
    try:
        for k in kernels:
            ok, rep = s.compile([k])
            report["compiled"][k.role] = ok
            if not ok:
                report["errors"][k.role] = {"compile": "the kernel did not load or run"}
                report["passed"][k.role] = [False] * len(s.configs)
                continue
            passed, errors = s.each_config(k, alone=len(kernels) == 1)
            report["passed"][k.role] = passed
            report["errors"][k.role] = errors
            # The next kernel's configurations find the device as this one found it: its input
            # pools go back first.
            s.data.forget(k)
        if all(all(p) for p in report["passed"].values()) and all(report["compiled"].values()):
            ok, cases = s.performance(kernels)
            report["cases"] = cases
            report["performance_ok"] = ok
    except Exception as e:
        why = memory_verdict(e, kernels, s.data, record)
        if why is None:
            raise
        # The footprints are the kernels' own doing, so they are not kept (outcomes.py).
        record.pop("memory_held", None)
        judged = kernels[-1].role
        report["compiled"].setdefault(judged, True)
        report["passed"][judged] = [False] * len(s.configs)
        report["errors"][judged] = {str(i): f"{s.name(i)}: device_memory" for i in range(len(s.configs))}
        report["cases"], report["performance_ok"] = [], False
    record["warnings"] = s.warnings
    write_json(out, "unseen_report.json", report)
    gates.write("unseen 0\n")


def memory_verdict(e, kernels, data, record):
    """Why the judged kernel fails, where `e` says the device's memory ran out while the judged
    kernel's processes held more of it than the other kernel's (memory_blame.py: measured by
    killing them, so the kernels are dead afterwards); None where the failure is the
    evaluation's own (then `e` is raised as before). The footprints go into the record."""
    if not out_of_memory(e) or getattr(data, "maps", None) is None or not kernels:
        return None
    import torch

    why, held = memory_blame.blame(kernels, data, torch)
    record["memory_held"] = held
    return why


def fail_for_memory(out, gates, gate, why, configs):
    """The gate under way fails for the judged kernel's memory (memory_verdict), in the report
    that gate writes."""
    if gate == "performance":
        cases = [{"test_case_id": f"perf{i + 1}", "execution_time_ms": -1.0, "error": why} for i in range(len(configs))]
        write_json(out, "performance_report.json", cases)
    else:
        write_json(out, f"{gate}_report.json", {"status": "fail", "error": why})
    gates.write(f"{gate} 1\n")


def run_gates(job, harness, data, configs, hidden, roles, out, gates, record, zygote=None, kept=None):
    """One evaluation of `roles` (the last is the one the gates judge), in fresh kernel
    processes (forked by `zygote` where there is one) and with a new secret seed: compile,
    correctness, performance (or, with `unseen` in the job, every hidden configuration for
    each kernel). Reports go to `out`, each gate's exit code to `gates`. The kernel processes
    are gone when it returns — except those of `kept` (a warm evaluator's: role -> kernel), which
    come from there where an earlier evaluation left one, and are left there for the next
    when this one ends well."""
    secret = os.urandom(32)
    # Written out only at the end, when no kernel process runs any more: then the inputs can
    # be made again by whoever wants to check.
    record["seed"] = secret.hex()
    kernels = []
    kept = {} if kept is None else kept

    compiled_opts = compiled_baseline(job, harness, roles)
    if compiled_opts is not None:
        record["compiled_baseline"] = {"options": compiled_opts}
    def kernel(role, compiled=None):
        """`role`'s kernel process: the one `kept` holds if it still runs, else a new one."""
        k = kept.pop(role, None)
        if k is not None and not k.alive():
            k.close()
            k = None
        if k is None:
            k = Kernel(role, job, child_env(job, role, compiled is not None), zygote)
            k.compiled = compiled
            k.source = os.path.join(job["kernels"][role], harness.source)
            k.source_rel = harness.source
            k.freeze()
            k.kept = role in job.get("keep_processes", [])
        return k

    def start():
        for role in roles:
            kernels.append(kernel(role))

    def start_compiled():
        """The original compiled by torch.compile (the original's sources, as the COMPILED
        user), loaded and run once; placed before the judged kernel. Where it fails, the
        evaluation goes on without it and the record says why. Once it failed, a later
        session's fresh processes do not try again: the same answer would cost the
        attempt again. The record is the evaluation's own, so a candidate that made it fail
        (by holding the device's memory) takes the column from no candidate after it."""
        if "error" in record["compiled_baseline"]:
            return
        t = time.monotonic()
        k = kernel(COMPILED, compiled_opts)
        ok, rep = s.compile([k])
        record["compiled_baseline"]["compile_s"] = round(time.monotonic() - t, 3)
        if not ok:
            k.close()
            record["compiled_baseline"]["error"] = rep["error"]
            return
        kernels.insert(len(kernels) - 1, k)

    def restart():
        """Fresh processes of both kernels, loaded and run once (a performance session)."""
        for k in kernels:
            k.close()
        kernels.clear()
        # The old processes' input pools and output mappings go with them: a new process
        # must be given pools of its own, and none of its outputs read through an old
        # mapping that happens to carry the same handle.
        data.end_session()
        start()
        ok, rep = s.compile(kernels)
        if not ok:
            raise KernelFailed(rep["error"])
        if compiled_opts is not None:
            start_compiled()
        return list(kernels)

    ended_well = False
    s = None
    try:
        t = time.monotonic()
        start()
        add_phase(record, "kernel_processes", time.monotonic() - t)
        s = Session(harness, data, configs, secret, job, hidden)
        if job.get("unseen"):
            unseen(s, kernels, out, gates, record)
            return
        # The gate under way, for a failure of the device's memory that is the judged kernel's.
        gate = "compile"
        try:
            t = time.monotonic()
            ok, rep = s.compile(kernels)
            record["gate_s"]["compile"] = time.monotonic() - t
            write_json(out, "compile_report.json", rep)
            gates.write(f"compile {0 if ok else 1}\n")
            if ok:
                gate = "correctness"
                t = time.monotonic()
                ok, rep = s.correctness(kernels[-1])
                record["gate_s"]["correctness"] = time.monotonic() - t
                write_json(out, "correctness_report.json", rep)
                gates.write(f"correctness {0 if ok else 1}\n")
            if ok:
                gate = "performance"
                if compiled_opts is not None:
                    start_compiled()
                t = time.monotonic()
                ok, cases = s.performance(list(kernels), restart)
                record["gate_s"]["performance"] = time.monotonic() - t
                write_json(out, "performance_report.json", cases)
                gates.write(f"performance {0 if ok else 1}\n")
        except Exception as e:
            why = memory_verdict(e, kernels, data, record)
            if why is None:
                raise
            fail_for_memory(out, gates, gate, why, s.configs)
        record["warnings"] = s.warnings
        # A kernel killed to measure its memory is not kept for a next evaluation.
        ended_well = "memory_held" not in record
    finally:
        if s is not None and s.parts.seconds:
            # Where the performance gate's (or the hidden configurations') seconds went.
            record["performance_parts_s"] = s.parts.record()
            record["performance_measured_s"] = round(s.parts.measured, 3)
        watched = getattr(data, "watched", None)
        if watched:
            # What the device did while every kernel process was stopped (gpu_guard.py): the
            # latest gap, start and stop of any watched stretch of this evaluator, in us.
            record["device_watch"] = dict(watched)
        if getattr(data, "named", None):
            record["outputs_named"] = data.named
        order = getattr(data, "order", None)
        if order is not None and order.seen["batches"]:
            # Whether graph-timed batches' calls ran one after another (order_check.py):
            # batches stamped, stamps, words read and words that told something.
            record["call_order"] = dict(order.seen)
        # Every kernel is closed whatever the alarm does meanwhile (closing is bounded): the
        # deadline is held until they are, and raised then.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        try:
            t = time.monotonic()
            for k in kernels:
                if ended_well and getattr(k, "kept", False):
                    kept[k.role] = k
                else:
                    k.close()
            add_phase(record, "close", time.monotonic() - t)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def record_failure(record, e, hidden=False):
    """The evaluator's own failure `e`, in its record. A derived harness (derived.py) that met a
    construct of the task's runner it cannot follow (at load, or on a configuration while the
    gates ran) is said apart: the runner then evaluates the task by its own commands, and
    says why. Where the configurations are `hidden`, only the failure's kind is kept: a
    traceback may quote what a kernel handed back (outcomes.py)."""
    if type(e).__name__ == "NotDerivable":
        # Its words may name the configuration (`for (4096, 7)`).
        record["not_derivable"] = "the task's runner on an unseen configuration" if hidden else str(e)[:2000]
    if hidden:
        kind = outcomes.kind_of(e)
        record["error"] = f"the unseen evaluation failed: {kind if kind == 'kernel_failed' else 'evaluation_failed'}"
        return
    record["error"] = traceback.format_exc()[-4000:]


def evaluate_into(job, harness, data, configs, hidden, roles, out, record, zygote=None, kept=None):
    """run_gates with its verdicts in `out/gates`: an evaluation that cannot be carried out
    (a kernel that fails to start, the deadline, the evaluator's own error) is `setup 96`
    with the reason in the record, which is written to `out/evaluator.json` whatever
    happened."""
    gates = open(os.path.join(out, "gates"), "w", buffering=1)
    try:
        if simulated.wanted(harness):
            simulated.run_gates(job, harness, configs, hidden, roles, out, gates, record, write_json)
        else:
            run_gates(job, harness, data, configs, hidden, roles, out, gates, record, zygote, kept)
    except (KernelFailed, Deadline) as e:
        if hidden:
            record_failure(record, e, hidden)
        else:
            record["error"] = str(e)
        gates.write("setup 96\n")
    except Exception as e:
        record_failure(record, e, hidden)
        gates.write("setup 96\n")
    finally:
        gates.close()
        write_json(out, "evaluator.json", record)


def use_own_scratch(job):
    """The evaluator's own writable directory (a root-only file system of its container, the
    root being read-only): its HOME, TMPDIR and Triton's cache, where a derived harness
    compiles the task's original kernel. None in a job run outside a container. Returns
    what the record says of it: "writable", or why not."""
    own = job.get("own_scratch")
    if not own:
        return None
    os.environ["HOME"] = own
    os.environ["TMPDIR"] = own
    os.environ["TRITON_CACHE_DIR"] = os.path.join(own, ".triton")
    import tempfile

    tempfile.tempdir = None
    try:
        fd, path = tempfile.mkstemp(dir=own)
        os.close(fd)
        os.unlink(path)
    except OSError as e:
        return f"not writable: {e}"
    return "writable"
