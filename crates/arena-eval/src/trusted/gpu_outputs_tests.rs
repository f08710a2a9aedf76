//! A GPU batch's outputs without a device (gpu.GpuData on a stand-in of PyTorch): a tensor
//! over an output is made only for the calls whose outputs are read (a timed batch's checked
//! sample), while every call's description is checked as before, and the sample's places are
//! worked out without making any.

use super::tests::assert_prints_ok;

/// A stand-in PyTorch (dtypes with their sizes: all gpu.py needs at import), GpuData with one
/// pool of eight 4 KiB slots at address 1 MiB, and a tensor_at that records what it made.
const STANDIN: &str = r#"
import sys, types
class DType:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize
    def __repr__(self):
        return "torch." + self.name
torch = types.ModuleType("torch")
for name, size in [("float32", 4), ("float64", 8), ("float16", 2), ("int8", 1), ("uint8", 1),
                   ("int16", 2), ("int32", 4), ("int64", 8), ("bool", 1), ("bfloat16", 2)]:
    setattr(torch, name, DType(name, size))
torch.Tensor = type("Tensor", (), {})
torch.cuda = types.SimpleNamespace()
sys.modules["torch"] = torch
sys.path.insert(0, sys.argv[1])
import gpu, samples, tensors
made = []
def tensor_at(ptr, shape, stride, dtype):
    made.append(ptr)
    return ("tensor", ptr, tuple(shape))
gpu.tensor_at = tensor_at
BASE, SLOT = 1 << 20, 4096
g = object.__new__(gpu.GpuData)
g.named = {}
g.state = {"candidate": {"pools": [BASE], "sizes": [8 * SLOT], "per_chunk": 8, "slot_bytes": SLOT,
                         "layout": [{"offset": 0, "shape": [4], "stride": [1], "dtype": "float32", "bytes": 16}]}}
k = types.SimpleNamespace(role="candidate")
calls = [{"slot": i} for i in range(4)]
def out(offset, shape=(4,), stride=(1,)):
    return {"tuple": False, "items": [{"pool": 0, "offset": offset, "shape": list(shape), "stride": list(stride), "dtype": "float32"}]}
reply = {"outputs": [out(i * SLOT) for i in range(4)]}
"#;

#[test]
fn tensors_are_made_for_the_read_outputs_and_every_description_is_checked() {
    let body = r#"
# The sample's calls only: the others are None, and no tensor was made for them.
outs = g.outputs(k, calls, reply, wanted=frozenset({1, 3}))
assert outs[0] is None and outs[2] is None, outs
assert outs[1] == ("tensor", BASE + SLOT, (4,)) and outs[3] == ("tensor", BASE + 3 * SLOT, (4,)), outs
assert made == [BASE + SLOT, BASE + 3 * SLOT], made
# Every call where nothing says which (the correctness gate, an untimed batch).
made.clear()
assert all(o is not None for o in g.outputs(k, calls, reply)) and len(made) == 4

# A description that does not hold up fails the batch though its call is not read.
def refused(outputs, why):
    try:
        g.outputs(k, calls, {"outputs": outputs}, wanted=frozenset({3}))
    except ValueError as e:
        assert why in str(e), (why, e)
    else:
        raise AssertionError(f"taken: {outputs[0]}")
refused([out(SLOT)] + reply["outputs"][1:], "input slot of another call")
refused([out(8 * SLOT - 8)] + reply["outputs"][1:], "outside the memory it names")
refused([out(0, stride=(-1,))] + reply["outputs"][1:], "whole numbers, none negative")
refused([out(0, shape=(2, 2))] + reply["outputs"][1:], "whole numbers, none negative")
refused(reply["outputs"][1:], "3 outputs for 4 calls")

# The sample's places (samples.py): addresses and spans, no tensor made.
made.clear()
spans = samples.Samples(g)._reply_spans(k, calls, reply["outputs"])
assert made == [] and spans[2] == [(BASE + 2 * SLOT, 16)], (made, spans)

# Outputs written into the arguments: read from the slots of the sample's calls only.
g.in_slot = lambda kernel, slot, output_args: made.append(("slot", slot)) or ("slot", slot)
made.clear()
assert g.outputs(k, calls, {"outputs": []}, output_args=(0,), wanted={2}) == [None, None, ("slot", 2), None]
assert made == [("slot", 2)], made

# The span worked out without a tensor is span_bytes' (tensors.py).
class T:
    def __init__(self, shape, stride, size):
        self.shape, self._stride, self._size = shape, stride, size
    def stride(self):
        return self._stride
    def element_size(self):
        return self._size
for shape, stride, size, want in [((), (), 4, 4), ((0, 5), (5, 1), 4, 0), ((3, 4), (1, 3), 2, 24),
                                  ((2, 3), (6, 2), 4, 44), ((5,), (0,), 8, 8)]:
    assert tensors.layout_span(shape, stride, size) == want, (shape, stride)
    assert tensors.span_bytes(T(shape, stride, size)) == want, (shape, stride)
print("ok")
"#;
    assert_prints_ok(&format!("{STANDIN}{body}"));
}
