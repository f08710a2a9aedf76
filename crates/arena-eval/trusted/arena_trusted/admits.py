"""Whether a configuration's own check can tell a kernel that computes from one that hands
back an earlier answer (issue 37). Found on an H200 in stop 54: KernelBench's level-3
3_DeepNarrowMLP, whose output barely depends on its input, read 51x for a kernel that returned
the outputs of earlier calls, every gate passing (docs/measurements.md).

The task's check is applied to the reference outputs of other inputs as if a kernel had given
them. Where it passes three of them in a row, the configuration admits other inputs' outputs:
a paired evaluation then times nothing on it and credits no speedup there, and says why
(measure.py), because any speed a kernel shows on it may be an answer it kept. A check that
tells inputs apart fails the first probe, so a sensitive task pays one comparison per
configuration; an output of few values (an index of ten) passes a probe by chance, which is why
one probe is not enough."""

PROBES = 3
# A reference larger than this is not kept for the probe (it would be held beside the next
# call's inputs and output): elementwise outputs that large follow their inputs anyway, and
# what admits other inputs' answers is mostly small (a loss, a norm, a narrow network's output).
MAX_BYTES = 1 << 30


def nbytes(x):
    """Device or host bytes of an output (tensors, nested in lists and tuples)."""
    if isinstance(x, (list, tuple)):
        return sum(nbytes(v) for v in x)
    n = getattr(x, "numel", None)
    if callable(n):
        return n() * x.element_size()
    return 0


def admits_other_inputs(session, i, other, want):
    """Whether configuration `i`'s check passes `other` (another input's reference) and then
    two more fresh inputs' references as the output for `want`'s inputs. A harness whose
    expected output is not a plain output (a derived one: its Want holds the runner's
    comparisons) is not probed here (derived.py warns where zeros pass)."""
    h = session.h
    if getattr(h, "make_case", None) is not None:
        return False
    for k in range(PROBES):
        try:
            if k:
                _, other = session.fresh(i, "admits")
            h.check(other, want)
        except Exception:
            # AssertionError: the check told them apart. Anything else (out of memory while
            # making another input, a comparison that cannot be made) says nothing against
            # the task, and is not the kernel's: not flagged.
            return False
    return True


def probe(session, i, want, kept):
    """One correctness call's reference `want` of configuration `i` (the correctness gate's,
    or an unseen evaluation's): the first is kept (where small enough), the next probes the
    check with it (admits_other_inputs), once per configuration; the outcome goes into
    `session.admits` and, where it admits, a warning into `session.warnings`."""
    if i in session.admits:
        return
    if i in kept:
        session.admits[i] = admits_other_inputs(session, i, kept.pop(i), want)
        if session.admits[i]:
            session.warnings.append(
                f"tolerance_admits_other_inputs: for {session.name(i)}, the task's own check passes "
                "the reference outputs of other inputs: a kernel that hands back an earlier answer "
                "cannot be told from one that computes, so no speedup is credited on it"
            )
    elif nbytes(want) <= MAX_BYTES:
        kept[i] = want
