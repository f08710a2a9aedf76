"""The gates, measured by the evaluator: compile (the kernel imports and runs once),
correctness (fresh inputs from a secret seed, the evaluator's own reference and check),
performance (batches of calls on fresh inputs, timed from outside, the original and the
agent's kernel in randomized pairs, every timed output checked)."""
import hashlib
import random
import statistics

import admits
import outcomes
import perf_parts
import record
import stopping
import timing
from gpu_errors import GuardError
from copies import _copy, _kept, _returned, same_bits
from kernel import KernelFailed


class CheckFailed(Exception):
    """A kernel's output was wrong; `kind` says how (outcomes.py)."""

    def __init__(self, message, kind="wrong_output"):
        super().__init__(message)
        self.kind = kind


class NotCapturable(Exception):
    """A kernel's calls could not be captured as a CUDA graph (it is timed eagerly)."""


def out_of_memory(e):
    """Whether `e` says the device's memory ran out (torch's OutOfMemoryError, or a driver
    allocation the evaluator made itself)."""
    return type(e).__name__ == "OutOfMemoryError" or "out of memory" in str(e).lower()


class Session:
    def __init__(self, harness, data, configs, secret, job, hidden):
        self.h = harness
        self.data = data
        self.configs = configs
        self.secret = secret
        self.job = job
        self.hidden = hidden
        self.rng = random.Random(self._seed("order"))
        # Where each batch's outputs are sampled (samples.py): drawn apart from the order.
        self.sample_rng = random.Random(self._seed("samples"))
        # Which calls of a timed batch are checked, where not every one is (checked()).
        self.check_rng = random.Random(self._seed("checked"))
        self.counter = 0
        self.warnings = list(getattr(harness, "warnings", []))
        # Per configuration: whether its reference changes an argument in place (fresh()).
        self.mutates = {}
        # Per configuration: False, or why its check cannot tell a kernel that computes
        # (admits.py: it passes zeros, or other inputs' outputs).
        self.admits = {}
        t = job["timeouts"]
        self.timeout = {g: float(t[g]) for g in t}
        self.perf = job["perf"]  # perf_settings.PerfSettings, read once (evaluate.py)
        self.graphs = harness.device == "cuda" and self.perf.graphs
        # How a batch is written, flushed, timed and settled (timing.py).
        self.window = timing.Window(data, self.perf)
        # Where the performance gate's seconds go (perf_parts.py): in the evaluator's record.
        self.parts = perf_parts.Parts()

    def _seed(self, *parts):
        h = hashlib.sha256(self.secret)
        for p in parts:
            h.update(b"\0" + str(p).encode())
        return int.from_bytes(h.digest()[:8], "little")

    def name(self, i):
        """How configuration `i` is named in reports: by index only when it is hidden."""
        if self.hidden:
            return f"unseen configuration {i} ({self.configs[i][1]})"
        return f"shape {self.configs[i][0]!r}"

    def failed(self, i, e):
        """Why configuration `i` failed with `e`, as reports may say it: the kernel's and the
        check's words where it is visible, only a kind (outcomes.py) where it is hidden."""
        if self.hidden:
            return f"{self.name(i)}: {outcomes.kind_of(e)}"
        return str(e)

    def fresh(self, i, purpose, reference=True):
        """Arguments never used before, from the secret seed, and the reference output (None
        where `reference` is False: a call whose output is not checked, checked())."""
        self.counter += 1
        seed = self._seed(purpose, i, self.counter)
        if getattr(self.h, "make_case", None) is not None:
            # A harness that makes a call's inputs and its expected output in one step (a
            # derived one: derived.py); the reference never sees the arguments it gives.
            args, want = self.h.make_case(self.configs[i][0], seed, purpose)
            return tuple(args), want if reference else None
        args = tuple(self.h.make_inputs(self.configs[i][0], seed))
        if self.h.output_args:
            self.h.check_output_args(args)
        if not reference:  # no reference runs: nothing can change the arguments first
            return args, None
        # The kernel gets `args` as they are after the reference ran: a reference that wrote
        # its answer into an output argument, or changed an input in place (a KernelBench
        # forward with an in-place op), would hand the kernel its answer or inputs it was not
        # meant to get. Output arguments always go to it as copies; other arguments too where
        # the configuration's first reference was seen to change one.
        copied = set(self.h.output_args or ())
        if self.mutates.get(i):
            copied = set(range(len(args)))
        given = tuple(_copy(a) if j in copied else a for j, a in enumerate(args))
        if i in self.mutates:
            return args, self.h.reference(*given)
        before = [None if j in copied else _kept(a) for j, a in enumerate(args)]
        want = self.h.reference(*given)
        changed = [j for j, b in enumerate(before) if b is not None and not same_bits(b, args[j])]
        self.mutates[i] = bool(changed)
        if changed:
            self.warnings.append(
                f"reference_mutates_inputs: the reference changed argument(s) {changed} in place; "
                "it is given copies of every argument from now on"
            )
            args = tuple(_returned(before[j], a) if j in changed else a for j, a in enumerate(args))
        return args, want

    def checked(self, n, purpose):
        """The calls of a batch of `n` whose outputs are checked against the reference: every
        one, except in a timed batch (`purpose` "performance") where `checked_calls` is set
        below `n`: then that many, drawn from the secret seed before any input is made. The
        kernel cannot tell them apart (each call's inputs come from the same draws, and only
        the evaluator holds the references), so a kernel wrong on a fraction f of a batch's
        calls passes it with probability (1 - f) ** checked_calls, once per timed batch; the
        correctness gate's and every untimed batch's outputs are all checked, and so is every
        call where the data layer cannot hide which calls are checked (CpuData)."""
        k = self.sampled_calls()
        if purpose != "performance" or k <= 0 or k >= n:
            return range(n)
        return frozenset(self.check_rng.sample(range(n), k))

    def sampled_calls(self):
        """Calls checked per timed batch, 0 for every one: `checked_calls` where the data layer
        can hide which calls are checked (GpuData), else 0."""
        k = self.perf.checked_calls
        return k if k > 0 and self.data.checks_a_sample else 0

    def check(self, got, want, where):
        """Raises CheckFailed where `got` is not `want` by the harness's check. `where` names
        the call; a hidden configuration's failure says only its kind."""
        try:
            self.h.check(got, want)
        except AssertionError as e:
            raise CheckFailed(f"{where}: {e}" if not self.hidden else f"{where}: wrong_output")
        except Exception as e:
            if out_of_memory(e):
                # The check's own memory ran out (before, a 6 GiB ReLU failed correctness
                # so): that says nothing of the output, so it is the evaluation's failure,
                # named as out of memory, never the kernel's wrong output nor a pass.
                raise
            if self.hidden:
                raise CheckFailed(f"{where}: output_not_comparable", "output_not_comparable")
            first = (str(e).strip().splitlines() or [""])[0]
            raise CheckFailed(f"{where}: output not comparable ({type(e).__name__}: {first[:200]})",
                              "output_not_comparable")

    def batch(self, kernel, i, n, purpose, gate, graph=False):
        """Times `n` calls of `kernel` on configuration `i`, each on fresh inputs; checks each
        output. Returns the batch's seconds by the evaluator's clock and the references.

        `graph`: the calls are captured as one CUDA graph first (untimed, before their inputs
        are written: the kernel cannot compute anything ahead), then the timed request
        replays it. The clock is still the evaluator's, around the whole request.

        On a GPU the evaluator watches the device from before the inputs are written until the
        request is sent (no kernel process may have work on it then), and the window ends
        when the evaluator has read a secret sample of the outputs itself (samples.py). The
        window, in order: timing.py. Which outputs are checked: checked()."""
        # A timed batch's parts are named (perf_parts.py); the cache is flushed before every
        # batch of the performance gate, its warm-ups too (write_inputs' `timed`).
        timed = purpose == "performance"
        part = self.parts.timed
        with part("inputs", timed):
            checked = self.checked(n, purpose)
            cases = [self.fresh(i, purpose, k in checked) for k in range(n)]
        args = [a for a, _ in cases]
        timeout = self.timeout[gate]
        described = None
        with part("write", timed):
            calls = self.data.assign(kernel, args, timeout, [w for _, w in cases])
        if graph:
            with part("capture", timed):
                captured, _ = kernel.request({"op": "capture", "calls": calls}, timeout)
            if not captured.get("captured"):
                # The kernel process's own words: a hidden configuration's say only the kind.
                why = "not_capturable" if self.hidden else str(captured.get("why") or "no reason given")[:500]
                raise NotCapturable(why)
            described = captured.get("outputs", [])
            request = {"op": "replay"}  # small both ways: the timed window holds the replay
        else:
            request = {"op": "run", "calls": calls}
        returns = getattr(self.h, "returns", False)
        order = None
        eager_stamps = None
        if not graph and getattr(self.data, "order", None) is not None:
            # Words of a few secret calls' outputs, read by the kernel process after each
            # one's call (order_check.py): a call that leaves its work to a later one is seen.
            eager_stamps = self.data.order.eager_plan(n, self.sample_rng)
            if eager_stamps:
                request["stamps"] = eager_stamps
        try:
            with part("write", timed):
                plan = self.data.plan(kernel, calls, described, self.sample_rng, self.h.output_args, returns)
            if graph:
                # The captured calls chained, with arena's stamps where the secret says
                # (order_check.py), now that no call of the kernel's runs any more.
                with part("capture", timed):
                    order = self.data.order_plan(kernel, calls, described, self.sample_rng, self.h.output_args, returns)
                    built, _ = kernel.request(order["request"] if order else {"op": "order", "stamps": []}, timeout)
                if not built.get("ordered"):
                    # The kernel process's own words: a hidden configuration's say only the kind.
                    why = "not_capturable" if self.hidden else f"its calls could not be chained: {str(built.get('why') or 'no reason given')[:400]}"
                    raise NotCapturable(why)
            with part("write", timed):
                cases = self.window.write_inputs(kernel, calls, cases, gate == "performance", lambda k: self.fresh(i, purpose, k in checked))
                if order is not None:
                    self.data.order.arm(order)
                # The inputs are in the calls' slots now: the evaluator's own copies go, so
                # that an input is held once while the kernel runs and its outputs are checked.
                cases = [(None, w) for _, w in cases]
                del args
                self.data.dropped_inputs(kernel)
            with part("window", timed):
                reply, elapsed = self.window.time(kernel, request, timeout, plan)
            if timed:
                self.parts.add_measured(elapsed)
            with part("check", timed):
                if graph:
                    reply = {"outputs": described}
                outs = self.data.outputs(kernel, calls, reply, self.h.output_args, returns, checked)
        except (KernelFailed, GuardError, NotCapturable):
            raise
        except Exception as e:  # what the kernel process handed back does not hold up
            raise self._unreadable(i, e)
        if len(outs) != n:
            raise CheckFailed(f"{self.name(i)}: {len(outs)} outputs for {n} calls" if not self.hidden
                              else f"{self.name(i)}: output_unreadable", "output_unreadable")
        with part("check", timed):
            for k, (got, (_, want)) in enumerate(zip(outs, cases)):
                if k in checked:
                    # Which call failed is the kernel's choice: not said of a hidden one.
                    self.check(got, want, f"{self.name(i)}, call {k + 1} of {n}" if not self.hidden else self.name(i))
            try:
                self.data.confirm(plan)
                if order is not None:
                    self.data.order.verify(order)
                if eager_stamps:
                    self.data.order.eager_verify(kernel, calls, reply, eager_stamps, self.h.output_args, returns)
            except Exception as e:
                raise self._unreadable(i, e)
            self.data.after(kernel, graph)
        return elapsed, [w for _, w in cases]

    def _unreadable(self, i, e):
        """CheckFailed for what a kernel handed back that did not hold up (`e`)."""
        kind = outcomes.kind_of(e)
        if self.hidden:
            return CheckFailed(f"{self.name(i)}: {kind}", kind)
        return CheckFailed(f"{self.name(i)}: {type(e).__name__}: {e}", kind)

    # The gates. Each returns (passed, report dict).

    def compile(self, kernels):
        for k in kernels:
            try:
                k.request(self.load_msg(k), self.timeout["compile"])
                # Triton and friends compile on the first launch: one call, output unchecked.
                args, want = self.fresh(0, "compile")
                calls = self.data.prepare(k, [args], [want], self.timeout["compile"])
                # Gone before the next kernel's are made: a large case's inputs held once.
                del args, want
                self.data.dropped_inputs(k)
                k.request({"op": "run", "calls": calls}, self.timeout["compile"])
                k.request({"op": "release", "empty_cache": self.data.big(k)}, self.timeout["compile"])
            except KernelFailed as e:
                return False, {"status": "fail", "error": f"{k.role}: {e}"}
        return True, {"status": "ok", "error": None}

    def load_msg(self, k):
        msg = {
            "op": "load",
            "source": k.source,
            "source_rel": k.source_rel,
            "entry": self.h.entry,
            "device": self.h.device,
        }
        if k.compiled is not None:
            msg["compiled"] = k.compiled
        if self.h.output_args:
            msg["in_place"] = True
            msg["output_args"] = list(self.h.output_args)
        if getattr(self.h, "returns", False):
            msg["returns"] = True
        if self.h.kernel_part:
            msg["kernel_part"] = True
        if self.h.launch:
            msg["launch"] = True
        return msg

    def correctness(self, kernel):
        trials = int(self.job.get("trials", 2))
        refs = set()
        kept = {}
        try:
            for i in range(len(self.configs)):
                for _ in range(trials):
                    _, wants = self.batch(kernel, i, 1, "correctness", "correctness")
                    refs.add(self.data.fingerprint(wants[0]))
                    admits.probe(self, i, wants[0], kept)
        except (CheckFailed, KernelFailed) as e:
            return False, {"status": "fail", "error": str(e), "num_shapes": len(self.configs)}
        report = {"status": "ok", "error": None, "num_shapes": len(self.configs)}
        if len(refs) == 1 and len(self.configs) * trials > 1:
            # Every input gave the same reference output: a constant kernel would pass.
            self.warnings.append(
                "reference_constant: the reference output was the same for every input; "
                "correctness cannot tell a constant kernel from a right one"
            )
            report["warning"] = self.warnings[-1]
        return True, report

    def each_config(self, kernel, alone=False):
        """Correctness per configuration (unseen evaluations): which pass, and why the others
        do not (named by index only).

        `alone`: the only kernel of the evaluation (a probe's original). A configuration
        whose inputs, reference or pools do not fit the device then fails (the probe drops
        it). Beside another kernel it is the evaluation's failure, not this kernel's: the
        other kernel's memory may be what it lacked."""
        trials = int(self.job.get("trials", 2))
        passed, errors = [], {}
        kept = {}
        for i in range(len(self.configs)):
            try:
                for _ in range(trials):
                    _, wants = self.batch(kernel, i, 1, "correctness", "correctness")
                    admits.probe(self, i, wants[0], kept)
                passed.append(True)
            except CheckFailed as e:
                passed.append(False)
                errors[str(i)] = str(e)
            except KernelFailed as e:
                passed.append(False)
                errors[str(i)] = self.failed(i, e) if self.hidden else f"{self.name(i)}: the kernel failed ({type(e).__name__})"
            except Exception as e:
                if not (alone and out_of_memory(e)):
                    raise
                # The evaluator's own inputs, reference or pools for it do not fit the device:
                # the configuration cannot run here, whichever kernel it is (a probe drops it).
                passed.append(False)
                errors[str(i)] = f"{self.name(i)}: device_memory" if self.hidden else f"{self.name(i)}: does not fit the device's memory"
                self.data.forget(kernel)
        return passed, errors

    def performance(self, kernels, restart=None):
        """Per configuration: calibrate each kernel's batch size, then randomized pairs of
        batches; per-call times are batch seconds over calls.

        The pairs are spread over sessions (`perf.sessions` on the CPU, `perf.gpu_sessions`
        on a GPU), each with fresh processes of both kernels (`restart`): a CPU process's own
        speed (where its memory landed) differs from the next one's by a few percent for
        identical code, and a GPU kernel that autotunes picks its configuration per process,
        so one process pair is one sample of that, however many batches it times. The cases
        then say which session each pair came from, and the interval is over sessions.

        The first kernel is the baseline, the last the one judged; an optional kernel between
        them (the original compiled by torch.compile) is timed in the same pairs, each of its
        times beside the judged kernel's (`<role>_ms`, `<role>_pairs_ms`), and where it fails
        (its output is wrong, it cannot run) the case goes on without it and says why
        (`<role>_error`). Where its seconds went: `parts` (perf_parts.py)."""
        with self.parts.part("other"):
            return self._performance(kernels, restart)

    def _performance(self, kernels, restart):
        perf = self.perf
        pairs = perf.pairs
        target = perf.target_batch_ms / 1000.0
        max_calls = perf.max_calls
        sessions = 1
        if restart is not None and len(kernels) >= 2:
            sessions = max(1, min(pairs, perf.gpu_sessions if self.h.device == "cuda" else perf.sessions))
        # With a stop width, one pair a session from `sessions` sessions up to `pairs`, until
        # the speedup's interval is narrow enough (stopping.py); else `pairs` over `sessions`.
        adaptive = perf.stop_width > 0 and sessions > 1
        least, most = sessions, (pairs if adaptive else sessions)
        share = [1] * most if adaptive else [pairs // sessions + (1 if s < pairs % sessions else 0) for s in range(sessions)]
        stop = None
        roles = [k.role for k in kernels]
        optional = [k.role for k in kernels if k.optional]
        state = []
        for i in range(len(self.configs)):
            case = {"test_case_id": f"u{i}" if self.hidden else f"perf{i + 1}", "execution_time_ms": -1.0}
            if not self.hidden:
                case["params"] = {"shape": _jsonable(self.configs[i][0])}
            why = self.admits.get(i)
            if why and len(roles) >= 2:
                # A pair's speed here may be zeros or an answer kept from an earlier call
                # (admits.py): nothing is timed, and the case says why.
                case["error"] = f"{self.name(i)}: {why}: {admits.UNCREDITED[why]}"
            state.append({"case": case, "n": None, "graph": None, "times": {r: [] for r in roles}, "session": [], "dropped": {}})
        for s in range(most):
            if s > 0:
                try:
                    with self.parts.part("sessions"):
                        kernels = restart()
                except KernelFailed as e:
                    why = outcomes.kind_of(e) if self.hidden else e
                    for st in state:
                        st["case"].setdefault("error", f"fresh kernel processes for session {s + 1}: {why}")
                    break
                for role in optional:
                    if role not in [k.role for k in kernels]:
                        for st in state:
                            st["dropped"].setdefault(role, f"its fresh process for session {s + 1} did not start")
            for i, st in enumerate(state):
                if "error" in st["case"]:
                    continue
                try:
                    self._session(kernels, i, st, share[s], s, target, max_calls)
                except (CheckFailed, KernelFailed, NotCapturable) as e:
                    # NotCapturable: a kernel captured while sized refuses a timed capture
                    # (in the session's fresh process, or at will): the case's failure.
                    st["case"]["error"] = self.failed(i, e)
            if adaptive and s + 1 >= least:
                stop = stopping.after_session(state, roles, least, most, s + 1, perf.stop_width)
                if stop is not None:
                    break
        sessions = stop["sessions"] if stop else sessions
        cases, failed = [], False
        for st in state:
            case, times = st["case"], st["times"]
            if "error" in case:
                failed = True
                cases.append(case)
                continue
            main = roles[-1]
            case["execution_time_ms"] = statistics.median(times[main])
            case["samples_ms"] = times[main]
            case["calls_per_batch"] = st["n"]
            case["timing"] = {r: "graph" if g else "eager" for r, g in st["graph"].items() if r not in st["dropped"]}
            sampled = self.sampled_calls()
            case["method"] = (
                "arena trusted: batches of calls timed by the evaluator, fresh inputs, "
                + (f"a secret sample of {sampled} outputs of each timed batch checked, every output of the other batches" if sampled > 0 else "every output checked")
                + (", each batch a CUDA graph replayed where the kernel can be captured" if any(st["graph"].values()) else "")
                + (f", {sessions} sessions of fresh kernel processes" if sessions > 1 else "")
            )
            if len(roles) >= 2:
                base = roles[0]
                case["baseline_ms"] = statistics.median(times[base])
                case["pairs_ms"] = [[b, c] for b, c in zip(times[base], times[main])]
                if sessions > 1:
                    case["paired_by"] = "session"
                    case["pair_sessions"] = st["session"]
                if stop is not None:
                    case["stop"] = stop
            for role in optional:
                if role in st["dropped"]:
                    case[f"{role}_error"] = st["dropped"][role]
                    continue
                case[f"{role}_ms"] = statistics.median(times[role])
                case[f"{role}_pairs_ms"] = [[o, c] for o, c in zip(times[role], times[main])]
            cases.append(case)
        return not failed, [record.checked(c) for c in cases]

    def _session(self, kernels, i, st, pairs, session, target, max_calls):
        """Configuration `i` in one session: sized in the first (and captured, on a GPU),
        warmed again by a call each in a later one (fresh processes), then its pairs."""
        perf = self.perf
        if st["n"] is None:
            with self.parts.part("sizing"):
                n = {}
                cap = min(max_calls, self.data.calls_cap(self.fresh(i, "size")[0]))
                for k in self._live(kernels, st):

                    def size(k=k):
                        for _ in range(perf.warmup_batches):
                            t1, _ = self.batch(k, i, 1, "warmup", "performance")
                        # A batch of one is mostly round trip: size a second guess by it, then
                        # the batch by the second guess's time per call.
                        guess = timing.first_guess(target, t1, cap)
                        t2, _ = self.batch(k, i, guess, "warmup", "performance")
                        n[k.role] = timing.sized_calls(target, guess, t2, cap)

                    self._guarded(k, st, size)
                st["graph"] = self._graphs(self._live(kernels, st), i, n, cap, target, st)
                st["n"] = timing.common_calls(n, [k.role for k in self._live(kernels, st) if not k.optional])
        else:
            with self.parts.part("warmup"):
                for k in self._live(kernels, st):
                    self._guarded(k, st, lambda k=k: self.batch(k, i, 1, "warmup", "performance"))
        for _ in range(pairs):
            order = self._live(kernels, st)
            self.rng.shuffle(order)
            for k in order:

                def timed(k=k):
                    t, _ = self.batch(k, i, st["n"][k.role], "performance", "performance", st["graph"][k.role])
                    st["times"][k.role].append(1000.0 * t / st["n"][k.role])

                self._guarded(k, st, timed)
            st["session"].append(session)

    @staticmethod
    def _live(kernels, st):
        return [k for k in kernels if k.role not in st["dropped"]]

    def _guarded(self, k, st, step):
        """Runs `step` of kernel `k`. A failure of an optional kernel (its output is wrong, its
        process failed, the device has no room for its inputs) drops it from the case, its
        reason kept, and gives its device memory back; any other kernel's is the case's."""
        try:
            step()
        except Exception as e:
            if not k.optional or not (isinstance(e, (CheckFailed, KernelFailed, NotCapturable)) or out_of_memory(e)):
                raise
            st["dropped"][k.role] = outcomes.kind_of(e) if self.hidden else (str(e)[:500] or type(e).__name__)
            self.data.forget(k)

    def _graphs(self, kernels, i, n, cap, target, st):
        """Which kernels configuration `i` times by graph replay: one captured batch of each
        (untimed here; its outputs are checked), its batches then sized to the target again
        by the replay's time. A kernel that cannot be captured is timed eagerly, its launch
        path counted, and the case says why: refusing capture never makes a kernel read
        faster (the original is the task's, and captures or not alike every time)."""
        graph = {k.role: False for k in kernels}
        if not self.graphs:
            return graph
        max_calls = self.perf.max_calls
        for k in kernels:

            def capture(k=k):
                try:
                    t, _ = self.batch(k, i, n[k.role], "warmup", "performance", graph=True)
                except NotCapturable as e:
                    st["case"].setdefault("graph_error", {})[k.role] = str(e)
                    return
                graph[k.role] = True
                n[k.role] = timing.replayed_calls(n[k.role], target, t, cap, max_calls)

            self._guarded(k, st, capture)
        return graph

def _jsonable(x):
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (int, float, str, bool)) or x is None:
        return x
    return repr(x)
