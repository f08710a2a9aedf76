"""Trusted evaluation of a simulated task: a harness with TIMING = "cycles" (c2rv32, kernels
for a RISC-V core in the KernelCraft manner; docs/simulated-tasks.md).

The kernel never runs as a process. Its role's user compiles it (the image's cross compiler,
the image's start-up code and linker script, fixed flags) in the role's scratch, and hands
the evaluator the flat binary through a pipe; the evaluator runs the image's simulator on it,
with inputs it makes from its own secret seed, reads the outputs the simulator dumps after the
kernel's exit, checks them with the harness's reference, and takes the cycle count from the
simulator: what the kernel computes can end its run, never set its time. Cycles are
deterministic (the same binary on the same inputs gives the same count), so one simulation per
kernel and configuration is the measurement; both kernels of a pair run on the same inputs.
"""
import hashlib
import os
import subprocess
import sys
import time

import jail
import record


def wanted(harness):
    return getattr(harness.module, "TIMING", None) == "cycles"


def simulator():
    """The image's simulator module (its root is the image's, read-only to every user)."""
    root = os.environ.get("RV32SIM_ROOT", "/opt/rv32sim")
    lib = os.path.join(root, "lib")
    if lib not in sys.path:
        sys.path.insert(0, lib)
    import rv32sim

    return rv32sim


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Simulated:
    """One evaluation's kernels (by role), built once, and simulations of them."""

    def __init__(self, job, harness, configs, hidden, record):
        self.job, self.h, self.configs, self.hidden, self.record = job, harness, configs, hidden, record
        self.sim = simulator()
        self.secret = os.urandom(32)
        self.binaries = {}
        self.timeouts = {g: float(t) for g, t in job["timeouts"].items()}
        self.work = os.environ.get("TMPDIR") or "/tmp"
        record["simulator"] = {"binary": self.sim.SIM, "sha256": file_sha256(self.sim.SIM)}

    def seed(self, *parts):
        h = hashlib.sha256(self.secret)
        for p in parts:
            h.update(b"\0" + str(p).encode())
        return int.from_bytes(h.digest()[:8], "little")

    def name(self, i):
        if self.hidden:
            return f"unseen configuration {i} ({self.configs[i][1]})"
        return f"shape {self.configs[i][0]!r}"

    def as_user(self, role):
        """subprocess.run as `role`'s user, with its scratch as HOME and TMPDIR and a bare
        environment. It starts in / (every path it is given is absolute): the child changes
        directory before it takes the user, and the evaluator cannot enter the scratch."""
        ids, scratch = self.job["users"][role], self.job["scratch"][role]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": scratch, "TMPDIR": scratch, "LC_ALL": "C"}

        def run(argv, **kw):
            return subprocess.run(
                argv, user=ids["uid"], group=ids["gid"], extra_groups=[], env=env, cwd="/",
                stdin=subprocess.DEVNULL, start_new_session=True, **kw)

        return run

    def build(self, role):
        """Compiles `role`'s kernel as its user; the binary comes back through a pipe. Raises
        the simulator's BuildError with the compiler's words."""
        run = self.as_user(role)
        source = os.path.join(self.job["kernels"][role], self.h.source)
        out_dir = os.path.join(self.job["scratch"][role], "rv32-build")
        uid = self.job["users"][role]["uid"]
        try:
            path = self.sim.build(source, out_dir, self.h.entry, timeout=self.timeouts["compile"], run=run)
            p = run(["cat", path], capture_output=True, timeout=60)
            if p.returncode != 0:
                raise self.sim.BuildError(f"the binary could not be read: {p.stderr.decode(errors='replace')[:500]}")
        finally:
            # Nothing a compile started outlives it.
            jail.kill_all(uid)
        binary = os.path.join(self.work, f"{role}.bin")
        with open(binary, "wb") as f:
            f.write(p.stdout)
        self.binaries[role] = binary
        self.record.setdefault("binaries", {})[role] = hashlib.sha256(p.stdout).hexdigest()

    def inputs(self, i, purpose):
        config = self.configs[i][0]
        args = tuple(self.h.make_inputs(config, self.seed(purpose, i)))
        want = self.h.reference(*args)
        return config, args, want

    def simulate(self, role, i, config, args, gate):
        """Runs `role`'s kernel on configuration `i`: (outputs, cycles). A run that does not
        end by the kernel's exit raises the simulator's SimError."""
        m = self.h.module
        work = os.path.join(self.work, f"sim-{role}")
        return self.sim.run(
            self.binaries[role], list(args), m.outputs(config), m.scalars(config), work,
            timeout=self.timeouts[gate])

    def judge(self, role, i, config, args, want, gate):
        """`role`'s cycles on configuration `i`, its outputs checked; AssertionError (naming
        the configuration) where they are wrong or the run failed."""
        # A hidden configuration's failure says only its kind (outcomes.py), not where: an
        # element's index, a fault's address or the status the kernel exits with would tell
        # its sizes.
        try:
            got, cycles = self.simulate(role, i, config, args, gate)
        except self.sim.SimError as e:
            why = "kernel_failed" if self.hidden else str(e)
            raise AssertionError(f"{self.name(i)}: {why}") from None
        try:
            self.h.check(tuple(got), want)
        except AssertionError as e:
            why = "wrong_output" if self.hidden else str(e)
            raise AssertionError(f"{self.name(i)}: {why}") from None
        return cycles

    def compile_gate(self, roles):
        for role in roles:
            try:
                self.build(role)
            except (self.sim.BuildError, subprocess.TimeoutExpired) as e:
                return False, {"status": "fail", "error": f"{role}: {e}"[:4000]}
        return True, {"status": "ok", "error": None}

    def correctness_gate(self, role):
        report = {"status": "ok", "error": None, "num_shapes": len(self.configs)}
        for i in range(len(self.configs)):
            config, args, want = self.inputs(i, "correctness")
            try:
                self.judge(role, i, config, args, want, "correctness")
            except AssertionError as e:
                return False, {"status": "fail", "error": str(e), "num_shapes": len(self.configs)}
        return True, report

    def performance_gate(self, roles):
        """Each configuration on fresh inputs, every kernel on the same ones, every output
        checked; the cycles of the first kernel (the baseline) and the last (the judged)."""
        cases, ok = [], True
        main = roles[-1]
        for i in range(len(self.configs)):
            case = {"test_case_id": f"u{i}" if self.hidden else f"perf{i + 1}", "execution_time_ms": -1.0}
            if not self.hidden:
                case["params"] = {"shape": list(self.configs[i][0])}
            config, args, want = self.inputs(i, "performance")
            cycles = {}
            try:
                for role in roles:
                    try:
                        cycles[role] = self.judge(role, i, config, args, want, "performance")
                    except AssertionError as e:
                        raise AssertionError(f"{role}: {e}") from None
            except AssertionError as e:
                case["error"] = str(e)
                ok = False
                cases.append(case)
                continue
            ms = {r: c / self.sim.CYCLES_PER_MS for r, c in cycles.items()}
            case.update({
                "execution_time_ms": ms[main], "cycles": cycles[main], "samples_ms": [ms[main]],
                "method": "arena trusted: simulated cycles of the kernel built by the evaluator, "
                          "fresh inputs, every output checked; ms at a nominal 100 MHz",
            })
            if len(roles) >= 2:
                base = roles[0]
                case.update({"baseline_ms": ms[base], "baseline_cycles": cycles[base],
                             "pairs_ms": [[ms[base], ms[main]]]})
            cases.append(case)
        return ok, [record.checked(c) for c in cases]

    def unseen(self, roles):
        """Every hidden configuration for each kernel, judged on its own; cycles paired where
        both pass them all (the report evaluation.unseen writes)."""
        report = {"compiled": {}, "passed": {}, "errors": {}, "cases": []}
        for role in roles:
            try:
                self.build(role)
                report["compiled"][role] = True
            except (self.sim.BuildError, subprocess.TimeoutExpired) as e:
                report["compiled"][role] = False
                report["errors"][role] = {"compile": "the kernel did not build"}
                report["passed"][role] = [False] * len(self.configs)
                continue
            passed, errors = [], {}
            for i in range(len(self.configs)):
                config, args, want = self.inputs(i, f"unseen-{role}")
                try:
                    self.judge(role, i, config, args, want, "correctness")
                    passed.append(True)
                except AssertionError as e:
                    passed.append(False)
                    errors[str(i)] = str(e)
            report["passed"][role], report["errors"][role] = passed, errors
        if all(report["compiled"].values()) and all(all(p) for p in report["passed"].values()):
            report["performance_ok"], report["cases"] = self.performance_gate(roles)
        return report


def run_gates(job, harness, configs, hidden, roles, out, gates, record, write_json):
    """The gates of a simulated task, in `out` and `gates` as evaluation.run_gates leaves
    them (evaluation.evaluate_into calls this for a harness that wants it, and writes the
    record)."""
    record["timing"] = "simulated cycles"
    s = Simulated(job, harness, configs, hidden, record)
    try:
        gates_of(s, job, roles, out, gates, record, write_json)
    finally:
        # Written at the end, as evaluation.run_gates does: with it anyone can make the
        # inputs again and simulate the same binaries to the same cycles.
        record["seed"] = s.secret.hex()


def gates_of(s, job, roles, out, gates, record, write_json):
    if job.get("unseen"):
        write_json(out, "unseen_report.json", s.unseen(roles))
        gates.write("unseen 0\n")
        return
    t = time.monotonic()
    ok, rep = s.compile_gate(roles)
    record["gate_s"]["compile"] = time.monotonic() - t
    write_json(out, "compile_report.json", rep)
    gates.write(f"compile {0 if ok else 1}\n")
    if not ok:
        return
    t = time.monotonic()
    ok, rep = s.correctness_gate(roles[-1])
    record["gate_s"]["correctness"] = time.monotonic() - t
    write_json(out, "correctness_report.json", rep)
    gates.write(f"correctness {0 if ok else 1}\n")
    if not ok:
        return
    t = time.monotonic()
    ok, cases = s.performance_gate(roles)
    record["gate_s"]["performance"] = time.monotonic() - t
    write_json(out, "performance_report.json", cases)
    gates.write(f"performance {0 if ok else 1}\n")
