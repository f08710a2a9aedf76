"""Attacks: arena's chain left out and its stamps forged, by patching arena's own code in the
kernel process (order.py). The calls' graphs run side by side; before the launch the process
reads the words the stamps would read of later calls (still unwritten), after it the words of
earlier calls (final), and writes into the evaluator's log what honest stamps would have.
Expected: the residual docs/trusted-evaluation.md states ("What is left"): what a kernel
process writes cannot be told from what arena's code there would have written, so this gains
what running its calls side by side gains."""
import ctypes

import order

_lib = ctypes.CDLL("libcuda.so.1")
_lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
_lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
_half = order.STAMP_WORDS // 2


def _read(addrs):
    buf = (ctypes.c_uint32 * len(addrs))()
    for i, a in enumerate(addrs):
        _lib.cuMemcpyDtoH_v2(ctypes.byref(buf, 4 * i), a, 4)
    return buf


def _build(self, log, stamps, flat=True):
    self._forge = [(log + off, addrs) for _, addrs, off in stamps]
    gd = self.gd
    self.parent = gd.create()
    for child in self.children:
        gd.add_child(self.parent, None, child)
    for child in self.children:
        gd.destroy(child)
    self.children = []
    self.exe = gd.instantiate(self.parent)


def _launch(self):
    before = [_read(addrs[_half:]) for _, addrs in self._forge]
    self.gd.launch(self.exe)
    for (at, addrs), pre in zip(self._forge, before):
        post = _read(addrs[:_half])
        words = (ctypes.c_uint32 * order.STAMP_WORDS)(*(list(post) + list(pre)))
        _lib.cuMemcpyHtoD_v2(at, words, 4 * order.STAMP_WORDS)
    _lib.cuCtxSynchronize()


order.Chain.build = _build
order.Chain.launch = _launch


install(lambda f: f)
