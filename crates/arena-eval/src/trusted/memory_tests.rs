//! What the evaluator holds of a large case (issue 40), without a device: a torch stand-in
//! whose tensors say which device they are on.

use super::tests::assert_prints_ok;

/// A stand-in for torch: flat tensors of bytes with a device, and the few operations the
/// argument copies use (`to`, `reshape(-1).view(uint8)`, slicing, `equal`).
const TORCH: &str = r#"
import types
class Tensor:
    def __init__(self, data, device):
        self.data, self.device = bytearray(data), device
        self.shape, self.dtype = (len(self.data),), "uint8"
    is_cuda = property(lambda self: self.device == "cuda")
    def numel(self):
        return len(self.data)
    def element_size(self):
        return 1
    def to(self, device):
        return Tensor(self.data, device)
    def clone(self):
        return Tensor(self.data, self.device)
    def reshape(self, *_):
        return self
    def view(self, _):
        return self
    def __getitem__(self, s):
        t = Tensor(b"", self.device)
        t.data = self.data[s]
        return t
torch = types.ModuleType("torch")
torch.Tensor, torch.uint8 = Tensor, "uint8"
def equal(a, b):
    assert a.device == b.device, "compared across devices"
    return a.data == b.data
torch.equal = equal
sys.modules["torch"] = torch
"#;

/// A large input is kept in host memory to tell whether the reference changed it, compared
/// with the device block by block; where the reference did change it, the kernel still gets
/// it as make_inputs made it, on the device.
#[test]
fn a_large_inputs_copy_waits_in_host_memory_and_returns_to_the_device() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
{TORCH}
import copies
copies.HOST_COPY_BYTES, copies.COMPARE_BLOCK = 8, 3
from measure import Session
def make_inputs(shape, seed):
    return (Tensor(bytes(range(seed % 50, seed % 50 + 10)), "cuda"),)
def in_place(x):
    out = Tensor(bytes(b ^ 1 for b in x.data), "cuda")
    x.data[7] ^= 0xFF  # in place, past the first block
    return out
h = types.SimpleNamespace(make_inputs=make_inputs, reference=in_place, output_args=None, device="cuda", path="h.py")
s = Session(h, None, [((10,), "visible")], b"secret", {"timeouts": {"performance": 1}}, False)
kept = copies._kept(make_inputs(None, 3)[0])
assert kept.device == "cpu", "a large input's copy stays on the device"
small = Tensor(b"abc", "cuda")
assert copies._kept(small).device == "cuda"
args, want = s.fresh(0, "correctness")
assert s.mutates[0], "the change past the first block was not seen"
assert args[0].device == "cuda", "the kernel's argument was left in host memory"
assert bytes(b ^ 1 for b in args[0].data) == bytes(want.data), "the kernel was given the changed input"
assert copies.same_bits(kept, make_inputs(None, 3)[0])
print("ok")
"#
    .replace("{TORCH}", TORCH);
    assert_prints_ok(&script);
}
