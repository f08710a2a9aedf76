"""The kernel process's side of GPU kernels (gpu.py has the evaluator's): the input pools the
evaluator sent by descriptor, mapped here and cut into slots; each call's arguments as views
over its slot; and how each output is named to the evaluator (in an input pool by its index,
else by the memory it lies in, exports.py)."""
import os
import socket

import torch

from driver import Driver
from exports import Exports
from tensors import DTYPES, _name, _plain, span_bytes, tensor_at


class ChildSide:
    """In the kernel process: the pools, the slots' arguments, and how outputs are named."""

    def __init__(self, sock):
        self.cu = Driver()
        self.sock = sock
        self.slots = {}
        self.pools = []  # (pointer, size) of each input pool, mapped from the evaluator's
        self.log = None  # (pointer, size) of the evaluator's log for arena's stamps (order.py)
        self._graphs = None  # order.GraphDriver, made on the first capture
        self.exports = Exports(self.cu, sock)

    def setup(self, msg):
        """Maps the input pools whose descriptors the evaluator sent just before, and after
        them the log arena's stamps write into (order.py)."""
        self._unmap()
        sizes = [int(x) for x in msg["pools"]]
        log = int(msg.get("log", 0))
        want = len(sizes) + (1 if log else 0)
        _, fds, _, _ = socket.recv_fds(self.sock, 16, want)
        try:
            if len(fds) != want:
                raise RuntimeError(f"{len(fds)} pool descriptors for {want} pools")
            for fd, size in zip(fds, sizes):
                self.pools.append(self.cu.import_fds([(fd, size)]))
            if log:
                self.log = self.cu.import_fds([(fds[-1], log)])
        finally:
            for fd in fds:
                os.close(fd)
        self.layout = msg["layout"]
        self.slot_bytes = int(msg["slot_bytes"])
        self.per_chunk = int(msg["per_chunk"])
        self.count = int(msg["slots"])
        self.slots = {}
        return {}

    def args(self, slot):
        """The arguments of slot `slot`: views over the pool, made once."""
        if slot not in self.slots:
            if not 0 <= slot < self.count:
                raise IndexError(f"no slot {slot}")
            chunk, k = divmod(slot, self.per_chunk)
            base = self.pools[chunk][0] + k * self.slot_bytes
            self.slots[slot] = tuple(
                _plain(a) if "offset" not in a else tensor_at(base + a["offset"], a["shape"], a["stride"], DTYPES[a["dtype"]])
                for a in self.layout
            )
        return self.slots[slot]

    def _unmap(self):
        for p, size in self.pools + ([self.log] if self.log else []):
            self.cu.unmap(p, size)
        self.pools, self.log = [], None

    def drop(self):
        """Unmaps the input pools (the evaluator frees them: a large case keeps one kernel's
        pool on the device at a time) and gives torch's cached blocks back."""
        self._unmap()
        self.slots, self.count = {}, 0
        self.exports.forget()
        torch.cuda.empty_cache()
        return {}

    def synchronize(self):
        torch.cuda.synchronize()

    def graphs(self):
        """The driver's graph calls and arena's stream and stamp kernel (order.py)."""
        if self._graphs is None:
            import order

            self._graphs = order.GraphDriver(self.cu)
        return self._graphs

    def read_words(self, row, fractions):
        """[output index, byte offset, value] of the word at each fraction of a call's output
        bytes (`row`, as `spans` gives it; order.word_at), read from the device now; None for a
        call without output bytes."""
        import ctypes

        from order import word_at

        out = []
        word = ctypes.c_uint32()
        for u in fractions:
            at = word_at(row, u)
            if at is None:
                out.append(None)
                continue
            j, off = at
            self.cu.check(self.cu.lib.cuMemcpyDtoH_v2(ctypes.byref(word), ctypes.c_uint64(row[j][0] + off), 4), "cuMemcpyDtoH")
            out.append([j, off, int(word.value)])
        return out

    def spans(self, slot, result, output_args, returns):
        """(address, bytes) of each output of a call, in the order order_check.py lists them:
        the output arguments in its slot first, then the tensors it returned."""
        row = []
        if output_args:
            args = self.args(slot)
            row += [(args[i].data_ptr(), span_bytes(args[i])) for i in output_args]
        if not output_args or returns:
            outs = result if isinstance(result, (tuple, list)) else [result]
            row += [(t.data_ptr(), span_bytes(t)) for t in outs if isinstance(t, torch.Tensor)]
        return row

    def begin(self):
        self.exports.begin()

    def send_shared(self):
        return self.exports.send()

    def forget_shared(self):
        self.exports.forget()

    def _where(self, t):
        """How the evaluator finds tensor `t`: in an input pool by its index, else by the
        memory it lies in (exports.py)."""
        ptr = t.data_ptr()
        for i, (p, size) in enumerate(self.pools):
            if p <= ptr < p + size:
                return {"pool": i, "offset": ptr - p}
        return self.exports.name(ptr, span_bytes(t))

    def describe(self, result):
        outs = result if isinstance(result, (tuple, list)) else [result]
        desc = []
        for t in outs:
            if not isinstance(t, torch.Tensor):
                desc.append({"value": t if isinstance(t, (int, float, bool)) or t is None else repr(t)})
                continue
            if not t.is_cuda:
                raise TypeError("the kernel returned a tensor that is not on the GPU")
            d = self._where(t)
            d.update({"shape": list(t.shape), "stride": list(t.stride()), "dtype": _name(t.dtype)})
            desc.append(d)
        return {"tuple": isinstance(result, (tuple, list)), "items": desc}
