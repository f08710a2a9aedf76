#!/usr/bin/env python3
"""The peer of ci/bench/trusted-overhead.py's `inline` side: arena's trusted evaluator with
every kernel run inside the evaluator's own process — the same gates, inputs, references,
checks, batches, pairs, sessions and (on a GPU) graph replays, without the split: no kernel
process, zygote, pipe, stop and thaw, or CUDA IPC. What arena's evaluation costs over this is
what keeping the candidate out of the trusted process costs. A benchmark's peer only, never a
way to evaluate: the kernel here can patch everything the evaluator does.

usage: python3 -I -B ci/bench/inline-evaluator.py JOB.json   (the job trusted-overhead.py writes)
"""
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "crates/arena-eval/trusted/arena_trusted"))

import child  # noqa: E402
import evaluate  # noqa: E402
import evaluation  # noqa: E402
import kernel  # noqa: E402
import timing  # noqa: E402
import wire  # noqa: E402


class InlineKernel(kernel.Kernel):
    """A kernel "process" that is a Child object of this process: each request is the same
    handler a kernel process runs, called directly and timed by the same clock."""

    def __init__(self, role, job, env, zygote=None):
        self.role = role
        self.compiled = None
        self.timeout = None
        self.memfd = os.memfd_create(f"arena-inline-{role}", 0)
        self.child = child.Child(-1, -1, self.memfd)
        self.pid = os.getpid()
        self.size = 0
        self.shm = None
        self.poison = 0
        self.frozen = False

    def alive(self):
        return True

    def freeze(self):
        pass

    def thaw(self):
        pass

    def request(self, msg, timeout_s, on_reply=None):
        seconds = timing.stopwatch()
        # The kernel's side decodes tensors as a kernel process would (the evaluator's own
        # decoding refuses to import PyTorch, see wire.py).
        wire.IMPORT_TORCH = True
        try:
            reply = self.child.handle(msg)
        finally:
            wire.IMPORT_TORCH = False
        if not reply.get("ok"):
            raise kernel.KernelFailed(str(reply.get("error", "failed"))[:2000])
        if on_reply is not None:
            on_reply(reply)  # the evaluator's read that ends a GPU batch's window (samples.py)
        return reply, seconds()

    def close(self):
        if self.shm is not None:
            self.shm.close()
        os.close(self.memfd)


def share_handles_in_process():
    """CUDA IPC cannot open a handle in the process that made it: here a handle stands for its
    own allocation, which both sides can already use."""
    import gpu

    mine = {}
    get, open_, close = gpu.Driver.handle, gpu.Driver.open, gpu.Driver.close

    def handle(self, base):
        h = get(self, base)
        mine[h] = base
        return h

    def opened(self, handle_hex):
        return mine[handle_hex] if handle_hex in mine else open_(self, handle_hex)

    def closed(self, ptr):
        if ptr not in mine.values():
            close(self, ptr)

    gpu.Driver.handle, gpu.Driver.open, gpu.Driver.close = handle, opened, closed


def main(job_path):
    # As each kernel process has a fresh scratch for its compile caches, so has this one.
    cache = tempfile.mkdtemp(prefix="arena-inline-triton-")
    os.environ["TRITON_CACHE_DIR"] = cache
    evaluation.Kernel = InlineKernel
    evaluate.early_zygote = lambda job: None
    evaluate.zygote_for = lambda job, harness, early=None: None
    try:
        share_handles_in_process()
    except ImportError:
        pass  # no PyTorch: a CPU evaluation, nothing shared on a device
    try:
        evaluate.main(job_path)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
