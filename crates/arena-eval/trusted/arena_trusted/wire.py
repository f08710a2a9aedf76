"""What crosses between arena's trusted evaluator and a kernel process.

Messages are length-prefixed JSON over pipes, small and bounded. Data (inputs and outputs of
kernel calls) are encoded with a small tagged binary codec into shared memory the evaluator
owns. Whatever a kernel process sends is untrusted: every decode is bounded (sizes, counts,
nesting), and nothing it sends is ever unpickled or evaluated.
"""
import array
import json
import os
import struct
import sys

# A GPU batch's answer describes every output of every call (an IPC handle, offset, shape and
# stride each, ~300 bytes): 4096 calls of a kernel with two outputs come to 2.5 MB. Bounded all
# the same.
MAX_MESSAGE = 16 << 20
MAX_DEPTH = 16
MAX_ITEMS = 1 << 26

# Tags of the codec.
NONE, FALSE, TRUE, INT, BIG, FLOAT, STR, BYTES, LIST, TUPLE, INTS, FLOATS, ARRAY, TENSOR = b"NftiIrsBLTADaX"
# Typecodes of array.array that cross as they are (fixed sizes on every Linux arena runs on).
ARRAY_CODES = "bBhHiIlLqQfd"


class WireError(Exception):
    """Something a kernel process sent that does not decode."""


def send(fd, obj):
    data = json.dumps(obj, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE:
        raise WireError(f"message of {len(data)} bytes is over the limit")
    _write_all(fd, struct.pack("<I", len(data)) + data)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd, n):
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            raise EOFError("the other side closed the pipe")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def recv(fd):
    (n,) = struct.unpack("<I", _read_exact(fd, 4))
    if n > MAX_MESSAGE:
        raise WireError(f"message of {n} bytes is over the limit")
    try:
        return json.loads(_read_exact(fd, n))
    except (ValueError, RecursionError) as e:
        # Nesting deeper than the interpreter's recursion limit ("[" * 100000) is not JSON
        # this side reads either: the same refusal, not an error of another kind.
        raise WireError(f"not JSON: {type(e).__name__}: {e}") from None


def encode(obj, out=None, depth=0):
    """Appends the encoding of `obj` (None, bool, int, float, str, bytes, list, tuple, a CPU
    tensor) to `out`."""
    if out is None:
        out = bytearray()
    if depth > MAX_DEPTH:
        raise WireError("nested too deeply")
    if obj is None:
        out.append(NONE)
    elif obj is True or obj is False:
        out.append(TRUE if obj else FALSE)
    elif isinstance(obj, int):
        if -(1 << 63) <= obj < (1 << 63):
            out.append(INT)
            out += struct.pack("<q", obj)
        else:
            s = str(obj).encode()
            out.append(BIG)
            out += struct.pack("<I", len(s)) + s
    elif isinstance(obj, float):
        out.append(FLOAT)
        out += struct.pack("<d", obj)
    elif isinstance(obj, str):
        s = obj.encode()
        out.append(STR)
        out += struct.pack("<I", len(s)) + s
    elif isinstance(obj, (bytes, bytearray)):
        out.append(BYTES)
        out += struct.pack("<I", len(obj)) + obj
    elif isinstance(obj, array.array) and obj.typecode in ARRAY_CODES:
        out.append(ARRAY)
        out += obj.typecode.encode() + struct.pack("<Q", len(obj)) + obj.tobytes()
    elif isinstance(obj, (list, tuple)):
        _encode_seq(obj, out, depth)
    elif _is_tensor(obj):
        _encode_tensor(obj, out)
    else:
        raise WireError(f"cannot send a {type(obj).__name__}")
    return out


# Tensors (CPU ones: a GPU kernel's data never crosses here) by element type, shape and raw
# bytes; only these element types.
TENSOR_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16",
                 "int32", "int64", "bool")


def _is_tensor(obj):
    torch = sys.modules.get("torch")  # only where torch is in use: nothing is imported here
    return torch is not None and isinstance(obj, torch.Tensor)


def _encode_tensor(t, out):
    torch = sys.modules["torch"]
    if t.device.type != "cpu":
        raise WireError(f"a tensor on {t.device} on the CPU path")
    name = str(t.dtype).replace("torch.", "")
    if name not in TENSOR_DTYPES:
        raise WireError(f"cannot send a {name} tensor")
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    out.append(TENSOR)
    out += struct.pack("<B", len(name)) + name.encode() + struct.pack("<B", t.dim())
    out += b"".join(struct.pack("<Q", n) for n in t.shape)
    out += struct.pack("<Q", len(raw)) + raw


# Whether decoding a tensor may import PyTorch. A kernel process may (its inputs are what the
# harness made); the evaluator says no (evaluate.py): there a tensor can only be a kernel's
# output, and one of a task that never loaded torch is wrong, not a reason to spend seconds
# of the deadline importing it as root.
IMPORT_TORCH = True


def _decode_tensor(take):
    torch = sys.modules.get("torch")
    if torch is None:
        if not IMPORT_TORCH:
            raise WireError("a tensor, where the harness uses no PyTorch")
        import torch

    (k,) = struct.unpack("<B", take(1))
    name = take(k).decode(errors="replace")
    if name not in TENSOR_DTYPES:
        raise WireError("bad tensor type")
    dtype = getattr(torch, name)
    (dims,) = struct.unpack("<B", take(1))
    if dims > 16:
        raise WireError("too many dimensions")
    shape = [struct.unpack("<Q", take(8))[0] for _ in range(dims)]
    count = 1
    for n in shape:
        count *= n
    if count > MAX_ITEMS:
        raise WireError("too many items")
    (nbytes,) = struct.unpack("<Q", take(8))
    if nbytes != count * torch.empty((), dtype=dtype).element_size():
        raise WireError("tensor size does not match its shape")
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    raw = bytearray(take(nbytes))
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)


def _encode_seq(obj, out, depth):
    items = obj
    if items and isinstance(obj, list):
        # A list of ints (or floats) crosses as one block. array() refuses what does not fit;
        # a float list is only sent as floats if its first item is one (ints stay exact).
        for tag, code in ((INTS, "q"), (FLOATS, "d")):
            if code == "d" and type(items[0]) is not float:
                continue
            try:
                a = array.array(code, items)
            except (TypeError, OverflowError):
                continue
            out.append(tag)
            out += struct.pack("<Q", len(a)) + a.tobytes()
            return
    out.append(TUPLE if isinstance(obj, tuple) else LIST)
    out += struct.pack("<Q", len(items))
    for x in items:
        encode(x, out, depth + 1)


def decode(buf, pos=0, depth=0):
    """Decodes one value from `buf` at `pos`; returns (value, next position). Bounded."""
    if depth > MAX_DEPTH:
        raise WireError("nested too deeply")
    if pos >= len(buf):
        raise WireError("truncated")
    tag = buf[pos]
    pos += 1

    def take(n):
        nonlocal pos
        if n < 0 or pos + n > len(buf):
            raise WireError("truncated")
        chunk = bytes(buf[pos:pos + n])
        pos += n
        return chunk

    if tag == NONE:
        return None, pos
    if tag in (TRUE, FALSE):
        return tag == TRUE, pos
    if tag == INT:
        return struct.unpack("<q", take(8))[0], pos
    if tag == FLOAT:
        return struct.unpack("<d", take(8))[0], pos
    if tag in (BIG, STR, BYTES):
        (n,) = struct.unpack("<I", take(4))
        raw = take(n)
        if tag == BYTES:
            return raw, pos
        try:
            text = raw.decode()
            return (int(text) if tag == BIG else text), pos
        except ValueError:
            raise WireError("bad text") from None
    if tag in (INTS, FLOATS):
        (n,) = struct.unpack("<Q", take(8))
        if n > MAX_ITEMS:
            raise WireError("too many items")
        a = array.array("q" if tag == INTS else "d")
        a.frombytes(take(8 * n))
        return a.tolist(), pos
    if tag == ARRAY:
        code = take(1).decode(errors="replace")
        if code not in ARRAY_CODES:
            raise WireError("bad array type")
        (n,) = struct.unpack("<Q", take(8))
        if n > MAX_ITEMS:
            raise WireError("too many items")
        a = array.array(code)
        a.frombytes(take(a.itemsize * n))
        return a, pos
    if tag == TENSOR:
        return _decode_tensor(take), pos
    if tag in (LIST, TUPLE):
        (n,) = struct.unpack("<Q", take(8))
        if n > MAX_ITEMS:
            raise WireError("too many items")
        items = []
        for _ in range(n):
            x, pos = decode(buf, pos, depth + 1)
            items.append(x)
        return (tuple(items) if tag == TUPLE else items), pos
    raise WireError(f"unknown tag {tag}")


def decode_all(buf):
    value, pos = decode(buf, 0)
    if pos != len(buf):
        raise WireError("trailing bytes")
    return value
