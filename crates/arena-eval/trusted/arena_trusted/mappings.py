"""The kernel processes' output allocations the evaluator has opened (CUDA IPC handle ->
its device pointer), kept between batches so that an allocation a kernel reuses is opened
once.

They are closed all at once, and only between batches: a batch's outputs are tensors over
these mappings until they are checked, so closing one while a batch is read would have its
earlier outputs read from memory no longer mapped (that happened: a batch of 2 261 calls of
AgentKernelArena's layernorm_gated returned its outputs in ~570 allocations, the cache was
cut at 512 in the middle, and call 1 read garbage).
"""

LIMIT = 512


class Mappings:
    def __init__(self, driver):
        self.cu = driver
        self.opened = {}

    def begin_batch(self):
        """Before a batch's outputs are opened: too many kept from earlier batches go now."""
        if len(self.opened) > LIMIT:
            self.close_all()

    def open(self, handle):
        """The pointer of `handle`'s allocation, opened now or earlier."""
        if handle not in self.opened:
            self.opened[handle] = self.cu.open(handle)
        return self.opened[handle]

    def close_all(self):
        for p in self.opened.values():
            self.cu.close(p)
        self.opened = {}
