//! The evaluator's defences, tested without a device: what a reference is given, the kernel
//! processes' freezing, the end of a GPU batch and the device watch's verdict (their logic,
//! with the device stood in for), and what a CPU evaluation may not need.

use super::tests::assert_prints_ok;

/// A stand-in for a tensor in the evaluator's Python tests: a list that `clone()` copies and
/// `==` compares by value.
const TENSOR: &str = r#"
class Tensor:
    def __init__(self, v):
        self.v = list(v)
    def clone(self):
        return Tensor(self.v)
    def __eq__(self, other):
        return self.v == other.v
"#;

/// A reference that writes its answer into an output argument (OUTPUT_ARGS) writes into a
/// copy: the arguments the kernel is given are as make_inputs made them.
#[test]
fn a_reference_never_writes_into_what_the_kernel_is_given() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
from measure import Session
from perf_settings import PerfSettings
{TENSOR}
def reference(x, out):
    out.v[:] = x.v
    return Tensor(x.v)
h = types.SimpleNamespace(
    make_inputs=lambda shape, seed: (Tensor([seed % 7, 1]), Tensor([0, 0])),
    reference=reference, output_args=(1,), device="cuda", path="h.py",
    check_output_args=lambda args: None,
)
s = Session(h, None, [((2,), "visible")], b"secret", {"timeouts": {"performance": 1}, "perf": PerfSettings()}, False)
args, want = s.fresh(0, "correctness")
assert args[1].v == [0, 0], "the reference wrote into the kernel's output argument"
assert want.v == args[0].v
print("ok")
"#
    .replace("{TENSOR}", TENSOR);
    assert_prints_ok(&script);
}

/// A reference that changes an input in place (a KernelBench forward with `x.relu_()`) would
/// hand the kernel its answer as its input: the kernel gets the inputs as make_inputs made
/// them, and every later reference of that configuration gets copies.
#[test]
fn a_reference_that_changes_its_inputs_never_hands_them_to_the_kernel() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
from measure import Session
from perf_settings import PerfSettings
{TENSOR}
seen = []
def reference(x):
    seen.append(x)
    out = Tensor([abs(a) for a in x.v])
    x.v[:] = out.v  # in place, as relu_ would
    return out
h = types.SimpleNamespace(
    make_inputs=lambda shape, seed: (Tensor([-(seed % 7) - 1, 2]),),
    reference=reference, output_args=None, device="cuda", path="h.py",
)
s = Session(h, None, [((2,), "visible")], b"secret", {"timeouts": {"performance": 1}, "perf": PerfSettings()}, False)
for k in range(3):
    args, want = s.fresh(0, "correctness")
    assert args[0].v[0] < 0, f"call {k}: the kernel's input is the reference's answer: {args[0].v}"
    assert want.v[0] == -args[0].v[0]
assert seen[1] is not None and all(x.v[0] > 0 for x in seen)
assert [w for w in s.warnings if w.startswith("reference_mutates_inputs")], s.warnings
# A reference that leaves its inputs alone gets them as they are (no copy).
h2 = types.SimpleNamespace(make_inputs=h.make_inputs, reference=lambda x: Tensor(x.v), output_args=None, device="cuda", path="h.py")
seen2 = []
def ref2(x):
    seen2.append(x)
    return Tensor(x.v)
h2.reference = ref2
s2 = Session(h2, None, [((2,), "visible")], b"secret", {"timeouts": {"performance": 1}, "perf": PerfSettings()}, False)
for k in range(2):
    args, _ = s2.fresh(0, "correctness")
    assert seen2[-1] is args[0]
assert not s2.warnings
print("ok")
"#
    .replace("{TENSOR}", TENSOR);
    assert_prints_ok(&script);
}

/// A check that runs out of device memory (KernelBench's 6 GiB ReLU did, before its check went
/// block by block) says nothing of the output: it is the evaluation's failure, never the
/// kernel's wrong output. Any other error of the check still fails the kernel, named.
#[test]
fn a_check_out_of_memory_is_never_the_kernels_fault() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
from measure import CheckFailed, Session
from perf_settings import PerfSettings
def oom(got, want):
    raise RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB")
h = types.SimpleNamespace(check=oom, device="cuda", path="h.py", output_args=None)
s = Session(h, None, [((2,), "visible")], b"secret", {"timeouts": {"performance": 1}, "perf": PerfSettings()}, False)
try:
    s.check(1, 1, "shape (2,)")
    raise SystemExit("the check's error was swallowed")
except CheckFailed as e:
    raise SystemExit(f"an out-of-memory check failed the kernel: {e}")
except RuntimeError as e:
    assert "out of memory" in str(e)
def garbled(got, want):
    raise ValueError("not a tensor")
h.check = garbled
try:
    s.check(1, 1, "shape (2,)")
    raise SystemExit("no failure")
except CheckFailed as e:
    assert "ValueError: not a tensor" in str(e), e
print("ok")
"#;
    assert_prints_ok(script);
}

/// A kernel's helper whose first thread calls `exit` while another thread runs shows as a
/// zombie (state Z) and keeps running: it is stopped with the rest of its user's processes,
/// and killed with them. Needs root (the helper takes a user of its own).
#[test]
fn a_helper_that_looks_like_a_zombie_is_stopped_and_killed() {
    let script = r#"
import ctypes, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import jail
UID = 60077
pid = os.fork()
if pid == 0:
    os.setgid(UID); os.setuid(UID)
    def spin():
        while True:
            pass
    threading.Thread(target=spin, daemon=True).start()
    ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: this thread only; the spinner goes on
    os._exit(1)
def ticks(tid):
    f = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
    return f[0], int(f[11]) + int(f[12])
def check():
    end = time.time() + 10
    while jail._state(pid) != "Z" and time.time() < end:
        time.sleep(0.01)
    assert jail._state(pid) == "Z", jail._state(pid)
    live = [t for t in os.listdir(f"/proc/{pid}/task") if ticks(t)[0] not in "ZX"]
    assert live, "no thread of the helper runs"
    assert jail.pids_of(UID) == [pid], jail.pids_of(UID)
    assert jail.freeze(UID), "the helper could not be stopped"
    state, before = ticks(live[0])
    time.sleep(0.3)
    state2, after = ticks(live[0])
    assert state2 in "Tt" and after == before, (state, state2, before, after)
    jail.thaw(UID)
    time.sleep(0.3)
    assert ticks(live[0])[1] > after, "thawed, the helper does not run again"
    assert jail.kill_all(UID), "the helper outlived kill_all"

try:
    check()
finally:
    # Whatever failed above, the spinner must not outlive the test (it holds its output).
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
assert not jail.pids_of(UID)
print("ok")
"#;
    assert_prints_ok(script);
}

/// The end of a GPU batch as the evaluator establishes it (samples.py), with the device's read
/// stood in for: the sampled words lie in the calls' outputs, drawn from the evaluator's secret
/// (the same secret, the same places); a batch whose sampled words are what they were when the
/// reply came passes, and one whose work went on after its answer (a word changed by the time
/// the outputs were checked) fails as deferred work.
#[test]
fn a_batch_whose_outputs_change_after_its_answer_fails_as_deferred_work() {
    let script = r#"
import random, sys, types
sys.path.insert(0, sys.argv[1])
from samples import Samples
from gpu_errors import DeferredWork
memory = {}
class Guard:
    own_word = 8
    def gather(self, addrs):
        return [memory.get(a, 0) for a in addrs]
class Data:
    guard = Guard()
    state = {"k": {"layout": [{"offset": 0, "bytes": 400}, {"offset": 512, "bytes": 64}], "slot_bytes": 1024}}
    def _slot_base(self, st, slot):
        return 1 << 20 | slot * st["slot_bytes"]
    def described(self, kernel, d, call, tensor=True):
        return None, d["addr"], d["bytes"]
k = types.SimpleNamespace(role="k")
calls = [{"slot": i} for i in range(50)]
def plan(seed, output_args=(1,), described=None):
    return Samples(Data(), 64).plan(k, calls, described, random.Random(seed), output_args)
p = plan(1)
assert p["addrs"] == plan(1)["addrs"] and p["addrs"] != plan(2)["addrs"], "the places follow the secret"
assert len(p["addrs"]) == 64 and all(a % 4 == 0 for a in p["addrs"])
slots = {(a - (1 << 20)) // 1024 for a in p["addrs"]}
assert all(512 <= (a - (1 << 20)) % 1024 < 576 for a in p["addrs"]), "only the output argument is sampled"
assert len(slots) > 20, "the sample spreads over the calls"
for a in p["addrs"]:
    memory[a] = 7
s = Samples(Data(), 64)
s.probe(k, p, {})
s.confirm(p)  # nothing changed: the batch stands
memory[p["addrs"][5]] = 8  # written after the answer
try:
    s.confirm(p)
    raise SystemExit("a changed word went unnoticed")
except DeferredWork as e:
    assert "1 of 64" in str(e), e
# An eagerly run batch: the places come with the reply, inside the window.
reply = {"outputs": [{"items": [{"addr": 4096 * (i + 1), "bytes": 10}, {"value": 3}]} for i in range(50)]}
e = plan(3, output_args=None)
assert e["addrs"] is None
s.probe(k, e, reply)
assert all(4096 <= a and a % 4096 < 10 for a in e["addrs"]), e["addrs"]
# Outputs that are values only: the read still runs (it waits behind a busy device), on a word of ours.
v = plan(4, output_args=None)
s.probe(k, v, {"outputs": [{"items": [{"value": 1}]} for _ in calls]})
assert v["addrs"] == [] and v["words"] == [0]
s.confirm(v)
print("ok")
"#;
    assert_prints_ok(script);
}

/// Device memory crosses between the evaluator and a kernel process only as file descriptors
/// (exports.py, mappings.py, kernel.py; the driver stood in for): a chunk is sent once with
/// the reply that first names it, and again under a new key where other memory was mapped at
/// its address; an output spanning chunks names them all; the evaluator maps only keys the
/// process sent, each set once; a reply that says it sent more than it did fails the kernel.
#[test]
fn device_memory_crosses_only_as_descriptors_the_process_sent() {
    let script = r#"
import os, socket, sys, types
sys.path.insert(0, sys.argv[1])
from exports import Exports
from mappings import Mappings
from kernel import Kernel, KernelFailed
MB = 1 << 20
class Cu:
    def __init__(self):
        self.chunks = {0x1000 * MB: [20 * MB, 1], 0x1000 * MB + 20 * MB: [20 * MB, 2]}
        self.held, self.imports = {}, []
    def range_of(self, p):
        for b, (s, _) in self.chunks.items():
            if b <= p < b + s:
                return b, s
        return p & ~0xFFFF, 0x10000  # cudaMalloc's
    def retain(self, p):
        b, _ = self.range_of(p)
        if b not in self.chunks:
            return None
        h = self.chunks[b][1]
        self.held[h] = self.held.get(h, 0) + 1
        return h
    def release(self, h):
        self.held[h] -= 1
    def export(self, h):
        return os.memfd_create(f"chunk{h}")
    def handle(self, b):
        return f"legacy{b:x}"
    def import_fds(self, parts):
        self.imports.append([s for _, s in parts])
        return 0x9000 * MB, sum(s for _, s in parts)
cu = Cu()
mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
ex = Exports(cu, theirs)
base = 0x1000 * MB
ex.begin()
a = ex.name(base + 64, 100)
b = ex.name(base + 4096, 100)
assert a == {"chunks": ["1"], "offset": 64} and b["chunks"] == ["1"], (a, b)
span = ex.name(base + 19 * MB, 2 * MB)
assert span == {"chunks": ["1", "2"], "offset": 19 * MB}, span
assert ex.name(0x5000 * MB + 8, 4) == {"handle": "legacy%x" % (0x5000 * MB), "offset": 8}
shared = ex.send()
assert shared == [["1", 20 * MB], ["2", 20 * MB]], shared
assert cu.held == {1: 1, 2: 1}, cu.held  # one reference per chunk shared, the rest returned
ex.begin()
assert ex.name(base, 4) == {"chunks": ["1"], "offset": 0} and ex.send() is None, "a chunk is sent once"
cu.chunks[base][1] = 7  # torch put other memory at the same address
ex.begin()
assert ex.name(base, 4) == {"chunks": ["3"], "offset": 0}
assert ex.send() == [["3", 20 * MB]] and cu.held[1] == 0 and cu.held[7] == 1
# The evaluator's side: the descriptors as the reply names them.
k = Kernel.__new__(Kernel)
k.role, k.pid, k.sock, k.received = "candidate", 42, mine, {}
k.sock.settimeout(1)
k._take_descriptors(shared)
k._take_descriptors([["3", 20 * MB]])
assert sorted(k.received) == ["1", "2", "3"]
maps = Mappings(cu)
assert maps.chunks(k, ["1", "2"]) == (0x9000 * MB, 40 * MB)
maps.chunks(k, ["1", "2"])
assert cu.imports == [[20 * MB, 20 * MB]], "mapped once"
assert not maps.too_many(k)
for bad in (["9"], [], "1", [1]):
    try:
        maps.chunks(k, bad)
        raise SystemExit(f"keys {bad!r} were mapped")
    except ValueError:
        pass
try:
    k._take_descriptors([["4", 20 * MB]])  # said, never sent
    raise SystemExit("a descriptor that never came was taken")
except KernelFailed:
    pass
for bad in ([["5", -1]], [["5"]], "x", [[5, 2]]):
    try:
        k._take_descriptors(bad)
        raise SystemExit(f"{bad!r} was taken")
    except KernelFailed:
        pass
# More chunks than one socket message carries arrive in several.
ex.begin()
for i in range(300):
    cu.chunks[0x2000 * MB + i * 2 * MB] = [2 * MB, 100 + i]
    ex.name(0x2000 * MB + i * 2 * MB, 8)
k._take_descriptors(ex.send())
assert len(k.received) == 303
k.drop_shared()
assert k.received == {}
ex.forget()
assert not any(cu.held.values()), cu.held
print("ok")
"#;
    assert_prints_ok(script);
}

/// A CPU task's image may have no ctypes (Debian's python3-minimal): every module a CPU
/// evaluation loads imports without it (the GPU's watch, which needs it, is loaded only on a GPU).
#[test]
fn a_cpu_evaluation_needs_no_ctypes() {
    let script = r#"
import sys
sys.modules["ctypes"] = None
sys.modules["_ctypes"] = None
sys.path.insert(0, sys.argv[1])
import data, evaluate, harness, kernel, measure, samples, zygote
print("ok")
"#;
    assert_prints_ok(script);
}

/// The device watch's verdict (gpu_guard.Watch.busy), on the figures measured on an H100: an
/// idle device's gaps (up to 20 us) and late starts pass; a gap of another context's smallest
/// kernel (296 us) or a stop held up by one (2.2 ms) does not.
#[test]
fn the_watch_tells_another_contexts_work_from_an_idle_device() {
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
from gpu_guard import Watch
def w(gap, start, stop):
    return Watch(gap * 1000, 30e6, 20000, 0, 0, start / 1e6, stop / 1e6)
assert w(20, 231, 30).busy(100, 1000) is None
assert "gap of 296 us" in w(296, 60, 20).busy(100, 1000)
assert "stopped 2179 us late" in w(9, 249, 2179).busy(100, 1000)
print("ok")
"#;
    assert_prints_ok(script);
}

/// Whatever a kernel process writes is decoded or refused as a WireError, never another
/// exception and never unbounded work (the evaluator's wire codec): valid encodings
/// of nested values and JSON messages, edited at random (bytes set, cut, inserted; length
/// fields set to 0, 2³²−1, 2⁶³ and just past the limits), 20 000 of each, from a fixed seed so
/// that a failure is reproduced by running the test again. A message nested past Python's
/// recursion limit was once a RecursionError, not a WireError.
#[test]
fn anything_a_kernel_process_writes_is_decoded_or_refused_as_a_wire_error() {
    let script = r#"
import array, os, random, struct, sys
sys.path.insert(0, sys.argv[1])
import wire
wire.IMPORT_TORCH = False  # as in the evaluator: a tensor where none is expected is refused
rng = random.Random(41)
LENGTHS = [0, 1, 2**26 + 1, 2**32 - 1, 2**63, 2**64 - 1]

def value(depth=0):
    makers = [lambda: None, lambda: True, lambda: rng.randrange(-2**70, 2**70),
              lambda: rng.random() * 1e300, lambda: "é" * rng.randrange(5),
              lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(5))),
              lambda: array.array(rng.choice(wire.ARRAY_CODES), [1, 2, 3]),
              lambda: [1.5, 2.5], lambda: [1, 2, 3],
              lambda: [value(depth + 1) for _ in range(rng.randrange(4))],
              lambda: tuple(value(depth + 1) for _ in range(rng.randrange(4)))]
    return makers[rng.randrange(len(makers) if depth < 4 else len(makers) - 2)]()

def edit(b):
    b = bytearray(b)
    for _ in range(rng.randrange(1, 5)):
        at = rng.randrange(len(b) + 1)
        op = rng.randrange(5)
        if op == 0 and b:
            b[min(at, len(b) - 1)] = rng.randrange(256)
        elif op == 1:
            del b[at:at + rng.randrange(1, 9)]
        elif op == 2:
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif op == 3:
            b = b[:at]
        else:
            n = rng.choice(LENGTHS)
            b[at:at + 8] = struct.pack("<Q", n % 2**64)
    return bytes(b)

def other(e):
    print("not a WireError:", type(e).__name__, e)
    sys.exit(1)

for i in range(20000):
    b = edit(wire.encode(value()))
    try:
        wire.decode_all(b)
    except wire.WireError:
        pass
    except Exception as e:
        print(b.hex())
        other(e)

import json
for i in range(2000):
    msg = json.dumps({"outputs": [[1, {"a": "b"}, "c", 2.5]] * rng.randrange(3)}).encode()
    body = edit(msg) if i % 2 else rng.choice([b"[" * 100000, b"{\"a\":" * 50000, b"\xff\xfe", b""])
    r, w = os.pipe()
    os.write(w, struct.pack("<I", len(body)) + body) if len(body) < 60000 else None
    if len(body) >= 60000:
        import threading
        t = threading.Thread(target=lambda: (os.write(w, struct.pack("<I", len(body)) + body)))
        t.start()
    try:
        wire.recv(r)
    except wire.WireError:
        pass
    except Exception as e:
        other(e)
    finally:
        if len(body) >= 60000:
            t.join()
        os.close(r)
        os.close(w)
print("ok")
"#;
    assert_prints_ok(script);
}
