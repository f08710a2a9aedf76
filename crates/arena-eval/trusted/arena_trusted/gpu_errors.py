"""What the evaluator's own view of the GPU can find (gpu_guard.py, samples.py), apart from
them: measure.py names these on every device, and an image without ctypes (a CPU task's) must
still load it."""


class GuardError(Exception):
    """The evaluator could not watch the device (its own failure, not a kernel's)."""


class DeferredWork(Exception):
    """A kernel's work went on after its process answered."""


class DeviceBusy(Exception):
    """The device ran work that was not the evaluator's while every kernel process was
    stopped."""


class CallsOverlapped(Exception):
    """A timed batch's calls did not run one after another: a call's output was unwritten
    after its turn, or a later call's written before (order_check.py)."""
