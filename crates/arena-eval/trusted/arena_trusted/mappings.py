"""The kernel processes' output memory the evaluator has mapped, kept between batches so that
memory a kernel reuses is mapped once: chunks a kernel process sent by file descriptor
(exports.py), mapped side by side as the output they hold spans them, and, for memory the
virtual memory API did not make, legacy IPC handles opened.

They are closed per kernel, and only between batches (GpuData.after): a batch's outputs are
tensors over these mappings until they are checked, so closing one while a batch is read would
have its earlier outputs read from memory no longer mapped (that happened: a batch of 2 261
calls of AgentKernelArena's layernorm_gated returned its outputs in ~570 allocations, the cache
was cut at 512 in the middle, and call 1 read garbage).
"""

LIMIT = 2048


class Mappings:
    def __init__(self, driver):
        self.cu = driver
        self.opened = {}  # (role, legacy handle) -> pointer
        self.mapped = {}  # (role, pid, keys) -> (pointer, size)

    def too_many(self, kernel):
        """Whether what is kept for `kernel` (mappings, and the descriptors it sent) is past
        the limit: GpuData.after closes them then, and the process shares anew."""
        kept = sum(1 for k in list(self.opened) + list(self.mapped) if k[0] == kernel.role)
        return kept + len(kernel.received) > LIMIT

    def open(self, kernel, handle):
        """The pointer of a legacy handle's allocation, opened now or earlier."""
        if not isinstance(handle, str):
            raise ValueError("an output names its memory by something that is not a handle")
        at = (kernel.role, handle)
        if at not in self.opened:
            self.opened[at] = self.cu.open(handle)
        return self.opened[at]

    def chunks(self, kernel, keys):
        """(pointer, size) of the chunks `kernel`'s process sent under `keys`, mapped side by
        side in this order; a key it never sent is refused."""
        if not isinstance(keys, list) or not keys or len(keys) > 4096 or not all(isinstance(k, str) for k in keys):
            raise ValueError("an output names its memory by something that is not a list of keys")
        at = (kernel.role, kernel.pid, tuple(keys))
        if at not in self.mapped:
            parts = []
            for k in keys:
                got = kernel.shared(k)
                if got is None:
                    raise ValueError("an output lies in memory its kernel process did not send")
                parts.append(got)
            self.mapped[at] = self.cu.import_fds(parts)
        return self.mapped[at]

    def close(self, role):
        """Closes what is kept of `role`'s outputs."""
        for at in [k for k in self.opened if k[0] == role]:
            self.cu.close(self.opened.pop(at))
        for at in [k for k in self.mapped if k[0] == role]:
            self.cu.unmap(*self.mapped.pop(at))

    def close_all(self):
        for role in {k[0] for k in list(self.opened) + list(self.mapped)}:
            self.close(role)
