"""The CUDA driver, called through ctypes by the evaluator and by kernel processes (gpu.py):
device memory shared between processes, and the copies and fills the evaluator makes while it
watches the device (gpu_guard.py).

Memory is shared by file descriptor (the driver's virtual memory API, POSIX handles, passed
over a Unix socket): only a process given the descriptor can map it. A legacy IPC handle
(cuIpcGetMemHandle) can be guessed: on an H100 (driver 580) one byte of a handle selects the
exporting process's allocation, and a handle with that byte changed opened another exported
allocation of another user's process (docs/trusted-evaluation.md). Legacy handles remain only
for a kernel's output in memory the virtual memory API did not make (read, never given)."""
import ctypes

import torch

CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR


class CudaError(Exception):
    pass


class IpcHandle(ctypes.Structure):
    """CUipcMemHandle: 64 opaque bytes, passed by value."""

    _fields_ = [("reserved", ctypes.c_char * 64)]


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _Prop(ctypes.Structure):
    """CUmemAllocationProp: pinned device memory, exportable as a POSIX file descriptor."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("handle_types", ctypes.c_int),
        ("location", _Location),
        ("win32", ctypes.c_void_p),
        ("flags", ctypes.c_ubyte * 8),
    ]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class Driver:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        u64p = ctypes.POINTER(ctypes.c_uint64)
        self.lib.cuIpcOpenMemHandle_v2.argtypes = [u64p, IpcHandle, ctypes.c_uint]
        self.lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_uint64]
        self.lib.cuMemGetAddressRange_v2.argtypes = [u64p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
        self.lib.cuMemcpyDtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
        self.lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        self.lib.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
        self.lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        size_t = ctypes.c_size_t
        self.lib.cuMemCreate.argtypes = [u64p, size_t, ctypes.POINTER(_Prop), ctypes.c_ulonglong]
        self.lib.cuMemAddressReserve.argtypes = [u64p, size_t, size_t, ctypes.c_uint64, ctypes.c_ulonglong]
        self.lib.cuMemMap.argtypes = [ctypes.c_uint64, size_t, size_t, ctypes.c_uint64, ctypes.c_ulonglong]
        self.lib.cuMemSetAccess.argtypes = [ctypes.c_uint64, size_t, ctypes.POINTER(_Access), size_t]
        self.lib.cuMemUnmap.argtypes = [ctypes.c_uint64, size_t]
        self.lib.cuMemAddressFree.argtypes = [ctypes.c_uint64, size_t]
        self.lib.cuMemRelease.argtypes = [ctypes.c_uint64]
        self.lib.cuMemRetainAllocationHandle.argtypes = [u64p, ctypes.c_void_p]
        self.lib.cuMemExportToShareableHandle.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_ulonglong]
        self.lib.cuMemImportFromShareableHandle.argtypes = [u64p, ctypes.c_void_p, ctypes.c_int]
        self.lib.cuMemGetAllocationGranularity.argtypes = [ctypes.POINTER(size_t), ctypes.POINTER(_Prop), ctypes.c_int]
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # the primary context, current on this thread
        self.device = torch.cuda.current_device()
        # Memory of the virtual memory API this process made (ptr -> (handle, size)).
        self.made = {}

    def check(self, rc, what):
        if rc != 0:
            msg = ctypes.c_char_p()
            self.lib.cuGetErrorString(rc, ctypes.byref(msg))
            raise CudaError(f"{what}: {msg.value.decode() if msg.value else rc}")

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

    # Memory shared by file descriptor (the virtual memory API).
    def _prop(self):
        return _Prop(type=1, handle_types=POSIX_FD, location=_Location(1, self.device))

    def _map(self, handles):
        """Memory of `handles` ([(handle, size), ...]) mapped read-write side by side at an
        address of its own: (pointer, total size)."""
        total = sum(size for _, size in handles)
        va = ctypes.c_uint64()
        self.check(self.lib.cuMemAddressReserve(ctypes.byref(va), total, 0, 0, 0), "cuMemAddressReserve")
        done = 0
        try:
            for h, size in handles:
                self.check(self.lib.cuMemMap(va.value + done, size, 0, h, 0), "cuMemMap")
                done += size
            access = _Access(_Location(1, self.device), 3)  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            self.check(self.lib.cuMemSetAccess(va, total, ctypes.byref(access), 1), "cuMemSetAccess")
        except BaseException:
            self.unmap(va.value, done, total)
            raise
        return va.value, total

    def alloc_shared(self, size):
        """Device memory of at least `size` bytes that can be given to another process by
        file descriptor (`export`), and nothing else. Returns (pointer, size)."""
        prop = self._prop()
        gran = ctypes.c_size_t()
        self.check(self.lib.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0), "cuMemGetAllocationGranularity")
        size = -(-size // gran.value) * gran.value
        h = ctypes.c_uint64()
        self.check(self.lib.cuMemCreate(ctypes.byref(h), size, ctypes.byref(prop), 0), "cuMemCreate")
        try:
            ptr, _ = self._map([(h.value, size)])
        except BaseException:
            self.lib.cuMemRelease(h)
            raise
        self.made[ptr] = (h.value, size)
        return ptr, size

    def free_shared(self, ptr):
        h, size = self.made.pop(ptr)
        self.unmap(ptr, size)
        self.lib.cuMemRelease(ctypes.c_uint64(h))

    def retain(self, ptr):
        """The virtual memory API's handle of the memory mapped at `ptr` (a reference the
        caller releases), or None where that memory was not made by it (cudaMalloc's)."""
        h = ctypes.c_uint64()
        if self.lib.cuMemRetainAllocationHandle(ctypes.byref(h), ctypes.c_void_p(ptr)) != 0:
            return None
        return h.value

    def release(self, handle):
        self.lib.cuMemRelease(ctypes.c_uint64(handle))

    def export(self, handle):
        """A new file descriptor of `handle`'s memory (the caller closes it)."""
        fd = ctypes.c_int(-1)
        self.check(self.lib.cuMemExportToShareableHandle(ctypes.byref(fd), handle, POSIX_FD, 0), "cuMemExportToShareableHandle")
        return fd.value

    def export_at(self, ptr):
        """A new file descriptor of the memory this process made at `ptr` (alloc_shared)."""
        return self.export(self.made[ptr][0])

    def import_fds(self, parts):
        """Maps the memory that file descriptors share ([(fd, size), ...], the descriptors
        staying the caller's) side by side: (pointer, total size), to `unmap`."""
        handles = []
        try:
            for fd, size in parts:
                h = ctypes.c_uint64()
                self.check(
                    self.lib.cuMemImportFromShareableHandle(ctypes.byref(h), ctypes.c_void_p(fd), POSIX_FD),
                    "cuMemImportFromShareableHandle",
                )
                handles.append((h.value, size))
            return self._map(handles)
        finally:
            # The mapping holds the memory from here on.
            for h, _ in handles:
                self.lib.cuMemRelease(ctypes.c_uint64(h))

    def unmap(self, ptr, size, reserved=None):
        """Unmaps `size` bytes mapped at `ptr` and frees the `reserved` addresses (`size`)."""
        if size:
            self.lib.cuMemUnmap(ctypes.c_uint64(ptr), size)
        self.lib.cuMemAddressFree(ctypes.c_uint64(ptr), size if reserved is None else reserved)

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
