"""Tensors over raw device memory (__cuda_array_interface__), and how an argument is laid out
in a slot: shared by the evaluator and kernel processes (gpu.py)."""
import torch

# Element types crossing as themselves; others (bfloat16, fp8) cross as an integer type of
# their size and are viewed back.
_CAI = {
    torch.float32: "<f4",
    torch.float64: "<f8",
    torch.float16: "<f2",
    torch.int8: "|i1",
    torch.uint8: "|u1",
    torch.int16: "<i2",
    torch.int32: "<i4",
    torch.int64: "<i8",
    torch.bool: "|b1",
}
_BY_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
DTYPES = {str(d).replace("torch.", ""): d for d in list(_CAI) + [torch.bfloat16]}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        DTYPES[_name] = getattr(torch, _name)


class _Cai:
    def __init__(self, ptr, shape, strides_bytes, typestr):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "strides": tuple(strides_bytes),
            "typestr": typestr,
            "data": (ptr, False),
            "version": 3,
        }


def tensor_at(ptr, shape, stride, dtype):
    """A tensor over device memory at `ptr` (no copy, not owned)."""
    item = torch.empty((), dtype=dtype).element_size()
    typestr = _CAI.get(dtype)
    base = dtype if typestr else _BY_SIZE[item]
    typestr = typestr or _CAI[base]
    strides = [s * item for s in stride]
    if not shape:
        shape, strides = (1,), (item,)
        t = torch.as_tensor(_Cai(ptr, shape, strides, typestr), device="cuda").reshape(())
    else:
        t = torch.as_tensor(_Cai(ptr, shape, strides, typestr), device="cuda")
    return t if base is dtype else t.view(dtype)


def is_dense(t):
    """Whether `t` fills its memory without gaps or overlaps, in some order of its dimensions
    (contiguous, or a transpose of a contiguous tensor: vLLM's conv states, "contiguous along
    dim"), its first element at the lowest address."""
    dims = sorted((st, n) for st, n in zip(t.stride(), t.shape) if n != 1)
    want = 1
    for st, n in dims:
        if st != want:
            return False
        want *= n
    return True


def dense(t):
    """`t` as it goes into a slot: with its own strides where it is dense (a kernel may rely on
    them: the runner made them so), else a contiguous copy."""
    return t if is_dense(t) else t.contiguous()


def _plain(a):
    """An argument that is not a tensor: a JSON value, or an element type by name."""
    if "dtype_value" in a:
        return DTYPES[a["dtype_value"]]
    return a["value"]


def span_bytes(t):
    """Bytes from a tensor's first element to one past its last."""
    return layout_span(t.shape, t.stride(), t.element_size())


def layout_span(shape, stride, itemsize):
    """span_bytes of a tensor of `shape` and `stride` (in elements) and elements of
    `itemsize` bytes, worked out without making it: 0 where it has no element."""
    if any(n == 0 for n in shape):
        return 0
    last = sum((n - 1) * s for n, s in zip(shape, stride))
    return (last + 1) * itemsize


def _name(dtype):
    return str(dtype).replace("torch.", "")
