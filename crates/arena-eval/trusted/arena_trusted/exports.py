"""In a kernel process: the device memory its outputs lie in, shared with the evaluator by file
descriptor (driver.py says why not by IPC handle).

A kernel process runs with PyTorch's expandable segments (evaluate.child_env), so torch's
memory is the virtual memory API's: chunks (of 2 or 20 MiB) mapped side by side. An output is
named by the chunks it spans and its offset in the first; each chunk is sent once (its
descriptor with the reply that first names it, under a key of this process's) and a reference
to it is held until the evaluator no longer maps it (`forget`), so that its key never names
other memory. Where torch may have put other memory at an address (a new batch), the chunk
there is asked of the driver again before its key is used.

An output in memory the virtual memory API did not make (cudaMalloc's, which only a kernel's
own code would use) is named by a legacy IPC handle: the evaluator reads it, and no honest
process exports such a handle of its own memory, so nothing guessed from it is anyone's."""
import os
import socket

PER_MESSAGE = 250  # descriptors per socket message (Linux takes at most 253)


class Exports:
    def __init__(self, cu, sock):
        self.cu = cu
        self.sock = sock
        self.chunks = {}  # base -> (size, handle, key)
        self.checked = set()  # bases whose handle was asked of the driver in this batch
        self.pending = []  # (key, size, fd): sent with the next reply
        self.count = 0
        self.legacy = {}  # base -> (size, IPC handle) of memory not made by the VM API

    def begin(self):
        """A new batch: torch may have mapped other memory where a chunk was."""
        self.checked = set()

    def _chunk(self, addr):
        """(base, size, key) of the chunk mapped at `addr`, shared now if it is new; None where
        the memory was not made by the virtual memory API."""
        base, size = self.cu.range_of(addr)
        known = self.chunks.get(base)
        if known is not None and base in self.checked and known[0] == size:
            return base, size, known[2]
        h = self.cu.retain(addr)
        if h is None:
            return None
        if known is not None and known[0] == size and known[1] == h:
            self.cu.release(h)  # the reference taken when it was shared is still held
            self.checked.add(base)
            return base, size, known[2]
        if known is not None:
            self.cu.release(known[1])
        self.count += 1
        key = str(self.count)
        self.pending.append((key, size, self.cu.export(h)))
        self.chunks[base] = (size, h, key)
        self.checked.add(base)
        return base, size, key

    def name(self, ptr, span):
        """How the evaluator finds `span` bytes at `ptr`: {"chunks": [keys], "offset": n}, or
        {"handle": legacy hex, "offset": n}."""
        first = self._chunk(ptr)
        if first is None:
            base, size = self.cu.range_of(ptr)
            known = self.legacy.get(base)
            if known is None or known[0] != size:
                known = (size, self.cu.handle(base))
                self.legacy[base] = known
            return {"handle": known[1], "offset": ptr - base}
        base, size, key = first
        keys, end = [key], base + size
        while end < ptr + span:
            nxt = self._chunk(end)
            if nxt is None or nxt[0] != end:
                raise RuntimeError("an output spans memory that is not one mapping")
            keys.append(nxt[2])
            end += nxt[1]
        return {"chunks": keys, "offset": ptr - base}

    def send(self):
        """Sends the descriptors of chunks named since the last reply; returns what the reply
        says of them ([[key, size], ...] in the order sent)."""
        if not self.pending:
            return None
        fds = [fd for _, _, fd in self.pending]
        try:
            for i in range(0, len(fds), PER_MESSAGE):
                socket.send_fds(self.sock, [b"fds"], fds[i:i + PER_MESSAGE])
        finally:
            for fd in fds:
                os.close(fd)
        shared = [[k, s] for k, s, _ in self.pending]
        self.pending = []
        return shared

    def forget(self):
        """The evaluator maps none of what was sent: the references go back (a key is never
        used twice: the next chunk gets a new one)."""
        for _, h, _ in self.chunks.values():
            self.cu.release(h)
        for _, _, fd in self.pending:
            os.close(fd)
        self.chunks, self.checked, self.legacy, self.pending = {}, set(), {}, []
