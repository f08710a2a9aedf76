"""Whether a configuration's own check can tell a kernel that computes from one that hands
back an earlier answer, or zeros. Found on an H200 on 2026-11-28: KernelBench's level-3
3_DeepNarrowMLP, whose output barely depends on its input, read 51x for a kernel that returned
the outputs of earlier calls, every gate passing (docs/benchmarks.md).

The task's check is applied to the reference outputs of other inputs as if a kernel had given
them. Where it passes three of them in a row, the configuration admits other inputs' outputs:
a paired evaluation then times nothing on it and credits no speedup there, and says why
(measure.py), because any speed a kernel shows on it may be an answer it kept. A check that
tells inputs apart fails the first probe, so a sensitive task pays one comparison per
configuration; an output of few values (an index of ten) passes a probe by chance, which is why
one probe is not enough. Where the check passes zeros of the reference's shapes (outputs smaller
than the tolerance: seven of vLLM's tasks), no speedup is credited either."""

PROBES = 3
# A reference larger than this is not kept for the kept-answer probe (it would be held beside
# the next call's inputs and output): elementwise outputs that large follow their inputs
# anyway, and what admits other inputs' answers is mostly small (a loss, a norm, a narrow
# network's output). It is still probed with zeros, made without memory of their own (one
# zero, expanded to the shape: 2026-11-28; before, KernelBench's 23_Softmax, whose 6 GiB of
# outputs are each under its atol, passed zeros and was credited their speed).
MAX_BYTES = 1 << 30


def nbytes(x):
    """Device or host bytes of an output (tensors, nested in lists, tuples and dicts; a derived
    harness's reference by the original's outputs it keeps)."""
    kept = getattr(x, "outputs_kept", None)
    if callable(kept):
        return nbytes(kept())
    if isinstance(x, dict):
        return sum(nbytes(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(nbytes(v) for v in x)
    n = getattr(x, "numel", None)
    if callable(n):
        return n() * x.element_size()
    return 0


def admits_other_inputs(session, i, other, want):
    """Whether configuration `i`'s check passes `other` (another input's reference) and then
    two more fresh inputs' references as the output for `want`'s inputs. A derived harness's
    reference is the runner's comparisons, not an output: its `check_kept` offers them the
    original's outputs on the other inputs (derived.py)."""
    check, _ = _check_for(session.h, want)
    for k in range(PROBES):
        try:
            if k:
                _, other = session.fresh(i, "admits")
            check(other, want)
        except Exception:
            # AssertionError: the check told them apart. Anything else (out of memory while
            # making another input, a comparison that cannot be made) says nothing against
            # the task, and is not the kernel's: not flagged.
            return False
    return True


class HarnessError(RuntimeError):
    """The harness cannot be probed as it says it is (the evaluation's error, never the
    kernel's)."""


def _check_for(h, want):
    """The check the probes offer other answers to, and whether it is check_kept: that where
    the reference keeps the original's outputs instead of being one (a derived harness), else
    check. A reference that keeps outputs with no check_kept beside it is an error, said, not a
    probe that can never pass: before 2026-11-28 the evaluator's harness wrapper did not pass a
    derived harness's check_kept on, and both probes of every derived harness answered "told
    apart" without looking (found on an H200: a zeros kernel read 3x on kda_recompute_wu)."""
    if not callable(getattr(want, "outputs_kept", None)):
        return h.check, False
    check = getattr(h, "check_kept", None)
    if check is None:
        raise HarnessError(f"the reference ({type(want).__name__}) keeps the original's outputs, and the harness has no check_kept to offer them to")
    return check, True


def zeros_of(x, expanded=False):
    """`x` with every tensor zeroed (same shapes and types), and whether it held one.
    `expanded`: each a single zero expanded to the shape (a view of one element, which a
    check reads as a full tensor of zeros: no memory the size of an output)."""
    if hasattr(x, "new_zeros") and hasattr(x, "shape"):
        if expanded:
            return x.new_zeros(()).expand(x.shape), True
        return x.new_zeros(x.shape), True
    if isinstance(x, dict):
        pairs = {k: zeros_of(v, expanded) for k, v in x.items()}
        return {k: z for k, (z, _) in pairs.items()}, any(t for _, t in pairs.values())
    if isinstance(x, (list, tuple)):
        pairs = [zeros_of(v, expanded) for v in x]
        return type(x)(z for z, _ in pairs), any(t for _, t in pairs)
    return x, False


class _Zeroed:
    """The original's outputs zeroed, as a derived harness's check_kept takes them."""

    def __init__(self, outputs):
        self.outputs = outputs

    def outputs_kept(self):
        return self.outputs


def admits_zeros(session, want, expanded=False):
    """Whether the check of `want` passes zeros of its outputs' shapes and types: a kernel that
    computes nothing then passes. A reference with no tensor in it is not probed (zeroing
    nothing would offer the check its own answer). `expanded`: zeros without memory of their
    own (zeros_of); a check that cannot read them that way (one that writes into its `got`)
    raises, and the configuration is not flagged."""
    check, kept = _check_for(session.h, want)
    try:
        if kept:
            zeros, any_tensor = zeros_of(want.outputs_kept(), expanded)
            zeros = _Zeroed(zeros)
        else:
            zeros, any_tensor = zeros_of(want, expanded)
        if not any_tensor:
            return False
        check(zeros, want)
    except Exception:
        # AssertionError: the check told zeros apart. Anything else (out of memory, a
        # comparison that cannot be made) says nothing against the task: not flagged.
        return False
    return True


# Why a configuration's speed is not credited (measure.py writes it into the case), by what
# its check admits.
UNCREDITED = {
    "tolerance_admits_zeros": "the task's own check passes zeros: a kernel that computes nothing "
    "cannot be told from one that computes, so no speedup is credited on it",
    "tolerance_admits_other_inputs": "the task's own check passes the reference outputs of other "
    "inputs: a kernel that hands back an earlier answer cannot be told from one that computes, so "
    "no speedup is credited on it",
}


def _flag(session, i, why):
    session.admits[i] = why
    session.warnings.append(f"{why}: for {session.name(i)}, {UNCREDITED[why]}")


def probe(session, i, want, kept):
    """One correctness call's reference `want` of configuration `i` (the correctness gate's,
    or an unseen evaluation's). The first is probed with zeros (admits_zeros; over MAX_BYTES,
    expanded zeros) and, where it is at most MAX_BYTES, kept; the next probes the check with
    the kept one (admits_other_inputs). Once per configuration, the outcome goes into
    `session.admits` (False, or the reason no speedup is credited: a key of UNCREDITED), and
    where it admits, a warning into `session.warnings`."""
    if i in session.admits:
        return
    if i in kept:
        session.admits[i] = False
        if admits_other_inputs(session, i, kept.pop(i), want):
            _flag(session, i, "tolerance_admits_other_inputs")
        return
    big = nbytes(want) > MAX_BYTES
    if admits_zeros(session, want, expanded=big):
        _flag(session, i, "tolerance_admits_zeros")
    elif big:
        session.admits[i] = False  # no kept copy at that size: no kept-answer probe
    else:
        kept[i] = want
