"""What may leave the evaluator about a hidden configuration: a kind from KINDS, never text.

A kernel that is right on a hidden configuration's correctness and then fails on purpose
could otherwise put its inputs' shapes and values into the words of its failure (an
exception's message or type name, a capture's reason), and those words would reach the
result and every report, and with them the hidden set. Which call of a batch failed is left
out too (the kernel picks it). Visible configurations keep their words: they are no secret.
The runner keeps only these kinds from an unseen evaluation (arena_eval::trusted::
HIDDEN_KINDS, held equal to this list by its tests).
"""

KINDS = (
    # The harness's check said the output is wrong.
    "wrong_output",
    # The check could not compare it (the kernel returned something else).
    "output_not_comparable",
    # What the kernel process handed back does not decode or does not hold up.
    "output_unreadable",
    # The kernel process raised, ended, or did not answer in time.
    "kernel_failed",
    # Its calls could not be captured as a CUDA graph (it is timed eagerly).
    "not_capturable",
    # Its work went on after it answered (gpu_guard.py, samples.py).
    "deferred_work",
    # A batch's calls did not run one after another (order_check.py).
    "calls_overlapped",
    # The device ran work while every kernel process was stopped.
    "device_busy",
    # The device's memory ran out.
    "device_memory",
    # The evaluation itself failed (the evaluator's own error, its deadline).
    "evaluation_failed",
)


def kind_of(e):
    """The kind of failure `e` is, where it was raised while a hidden configuration ran."""
    kind = getattr(e, "kind", None)
    if kind in KINDS:
        return kind
    name = type(e).__name__
    if name == "KernelFailed":
        return "kernel_failed"
    if name == "NotCapturable":
        return "not_capturable"
    if name == "DeferredWork":
        return "deferred_work"
    if name == "CallsOverlapped":
        return "calls_overlapped"
    if name == "DeviceBusy":
        return "device_busy"
    if name == "OutOfMemoryError" or "out of memory" in str(e).lower():
        return "device_memory"
    if name == "CheckFailed":
        return "wrong_output"
    return "output_unreadable"
