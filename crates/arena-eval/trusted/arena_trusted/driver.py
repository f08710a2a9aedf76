"""The CUDA driver, called through ctypes by the evaluator and by kernel processes (gpu.py):
device memory, IPC handles, and the copies and fills the evaluator makes while it watches the
device (gpu_guard.py)."""
import ctypes

import torch

CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1


class CudaError(Exception):
    pass


class IpcHandle(ctypes.Structure):
    """CUipcMemHandle: 64 opaque bytes, passed by value."""

    _fields_ = [("reserved", ctypes.c_char * 64)]


class Driver:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        u64p = ctypes.POINTER(ctypes.c_uint64)
        self.lib.cuIpcOpenMemHandle_v2.argtypes = [u64p, IpcHandle, ctypes.c_uint]
        self.lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_uint64]
        self.lib.cuMemGetAddressRange_v2.argtypes = [u64p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
        self.lib.cuMemAlloc_v2.argtypes = [u64p, ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        self.lib.cuMemcpyDtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
        self.lib.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
        self.lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # the primary context, current on this thread

    def check(self, rc, what):
        if rc != 0:
            msg = ctypes.c_char_p()
            self.lib.cuGetErrorString(rc, ctypes.byref(msg))
            raise CudaError(f"{what}: {msg.value.decode() if msg.value else rc}")

    def alloc(self, size):
        p = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size)), "cuMemAlloc")
        return p.value

    def free(self, ptr):
        self.lib.cuMemFree_v2(ctypes.c_uint64(ptr))

    def range_of(self, ptr):
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.check(
            self.lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
            "cuMemGetAddressRange",
        )
        return base.value, size.value

    def handle(self, base):
        h = IpcHandle()
        self.check(self.lib.cuIpcGetMemHandle(ctypes.byref(h), ctypes.c_uint64(base)), "cuIpcGetMemHandle")
        return bytes(ctypes.string_at(ctypes.addressof(h), 64)).hex()

    def open(self, handle_hex):
        raw = bytes.fromhex(handle_hex)
        if len(raw) != 64:
            raise CudaError("an IPC handle has 64 bytes")
        h = IpcHandle.from_buffer_copy(raw)
        p = ctypes.c_uint64()
        self.check(
            self.lib.cuIpcOpenMemHandle_v2(ctypes.byref(p), h, ctypes.c_uint(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)),
            "cuIpcOpenMemHandle",
        )
        return p.value

    def close(self, ptr):
        self.lib.cuIpcCloseMemHandle(ctypes.c_uint64(ptr))

    # Copies and fills by the driver itself (its copy engines and built-in kernels), on
    # torch's current stream: what the evaluator does while it watches the device. A kernel of
    # torch's would be loaded on its first launch (CUDA's lazy loading), and loading waits for
    # every kernel of the context to end, the watch among them: the evaluator would wait on
    # itself.
    def copy(self, dst, src, nbytes):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.check(self.lib.cuMemcpyDtoDAsync_v2(dst, src, nbytes, stream), "cuMemcpyDtoDAsync")

    def fill(self, ptr, byte, nbytes):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.check(self.lib.cuMemsetD8Async(ptr, byte, nbytes, stream), "cuMemsetD8Async")
