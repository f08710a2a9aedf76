//! What the evaluator holds of a large case, without a device: a torch stand-in
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
from perf_settings import PerfSettings
def make_inputs(shape, seed):
    return (Tensor(bytes(range(seed % 50, seed % 50 + 10)), "cuda"),)
def in_place(x):
    out = Tensor(bytes(b ^ 1 for b in x.data), "cuda")
    x.data[7] ^= 0xFF  # in place, past the first block
    return out
h = types.SimpleNamespace(make_inputs=make_inputs, reference=in_place, output_args=None, device="cuda", path="h.py")
s = Session(h, None, [((10,), "visible")], b"secret", {"timeouts": {"performance": 1}, "perf": PerfSettings()}, False)
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

/// A stand-in device for memory_blame.py: free bytes the driver counts, and kernels whose
/// processes give back what they hold when their user is killed.
const DEVICE: &str = r#"
import types
free = [10 << 30]
holds = {}
killed = []
torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(
    mem_get_info=lambda: (free[0], 80 << 30),
    synchronize=lambda: None,
    empty_cache=lambda: None,
)
sys.modules["torch"] = torch
import jail
def kill_all(uid):
    killed.append(uid)
    free[0] += holds.pop(uid, 0)
    return True
jail.kill_all = kill_all
class K:
    def __init__(self, role, uid, held, sent=0):
        self.role, self.uid, self.sent = role, uid, sent
        holds[uid] = held
    def drop_shared(self):
        # What the evaluator mapped of its outputs: given back only once both sides let go.
        holds[self.uid] += self.sent
        self.sent = 0
class Maps:
    closed = []
    def close(self, role):
        self.closed.append(role)
data = types.SimpleNamespace(maps=Maps())
import memory_blame
memory_blame.STILL_S, memory_blame.POLL_S = 0.0, 0.0
"#;

/// A candidate whose processes hold the device's memory (a tensor kept at import, deaf to
/// `gpu_drop`) is blamed for the case that did not fit, with both footprints, measured by
/// killing each kernel's user; memory hidden behind an output the evaluator mapped counts as
/// the kernel's. Equal footprints blame no one: the evaluation fails as its own.
#[test]
fn a_kernel_that_holds_the_devices_memory_is_blamed_for_the_case_that_did_not_fit() {
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
{DEVICE}
GiB = 1 << 30
base, hog = K("baseline", 60001, 1 * GiB), K("candidate", 60002, 2 * GiB, sent=60 * GiB)
why, held = memory_blame.blame([base, hog], data, torch)
assert held == {"baseline": 1 * GiB, "candidate": 62 * GiB}, held
assert killed == [60001, 60002] and data.maps.closed == ["baseline", "candidate"]
assert why and "candidate" in why and "62.00 GiB" in why and "1.00 GiB" in why, why

killed.clear()
a, b = K("baseline", 60001, GiB), K("candidate", 60002, GiB + (100 << 20))
why, held = memory_blame.blame([a, b], data, torch)
assert why is None and held["candidate"] == GiB + (100 << 20), (why, held)

import evaluation
class Oom(Exception):
    pass
a, b = K("baseline", 60001, GiB), K("candidate", 60002, 20 * GiB)
record = {}
assert evaluation.memory_verdict(ValueError("no"), [a, b], data, record) is None and record == {}
why = evaluation.memory_verdict(Oom("CUDA out of memory. Tried to allocate 6.00 GiB"), [a, b], data, record)
assert "candidate" in why and record["memory_held"]["candidate"] == 20 * GiB, record
cpu = types.SimpleNamespace()
assert evaluation.memory_verdict(Oom("out of memory"), [a, b], cpu, {}) is None, "CPU data has no device to blame"

import io, json, os, tempfile
out = tempfile.mkdtemp()
for gate in ("correctness", "performance"):
    g = io.StringIO()
    evaluation.fail_for_memory(out, g, gate, why, [1, 2])
    assert g.getvalue() == f"{gate} 1\n", g.getvalue()
rep = json.load(open(os.path.join(out, "correctness_report.json")))
assert rep == {"status": "fail", "error": why}, rep
cases = json.load(open(os.path.join(out, "performance_report.json")))
assert [c["test_case_id"] for c in cases] == ["perf1", "perf2"] and all(c["error"] == why for c in cases)
print("ok")
"#
    .replace("{DEVICE}", DEVICE);
    assert_prints_ok(&script);
}
