# Run after fake_driver.py: the evaluator's checks of a batch's stamps (order_check.py), on
# stand-ins for its data layer: output spans, device memory as a dict, its gather.
import random
import types

sys.modules.setdefault("torch", types.SimpleNamespace(
    cuda=types.SimpleNamespace(current_stream=lambda: types.SimpleNamespace(synchronize=lambda: None))))
import order_check  # noqa: E402
from gpu_errors import CallsOverlapped  # noqa: E402

mem = {}


class Samples:
    def _slot_spans(self, kernel, call, output_args):
        return []

    def _reply_spans(self, kernel, calls, described):
        return [[(9000 + c["slot"] * 64, 32)] for c in calls]


class Data:
    samples = Samples()
    state = {"candidate": {"log": 77000}}
    guard = types.SimpleNamespace(gather=lambda addrs: [mem.get(a, 0) for a in addrs])
    cu = types.SimpleNamespace(fill=lambda p, b, n: None)


kernel = types.SimpleNamespace(role="candidate")
calls = [{"slot": i} for i in range(40)]


def batch(seed, write_log):
    """A batch's plan, its words before (1) and final (2), and the log as `write_log` says."""
    oc = order_check.OrderCheck(Data())
    plan = oc.plan(kernel, calls, [{}] * 40, random.Random(seed), None)
    assert plan["count"] == 16 and len(plan["words"]) == 16 * order.STAMP_WORDS
    assert all(0 <= k < 39 for k, _, _ in plan["request"]["stamps"])
    for _, a, _ in plan["words"]:
        mem[a] = 1
    oc.arm(plan)
    for _, a, _ in plan["words"]:
        mem[a] = 2
    for i, (role, a, at) in enumerate(plan["words"]):
        mem[at] = write_log(i, role)
    return oc, plan


def fails(oc, plan):
    try:
        oc.verify(plan)
    except CallsOverlapped as e:
        return str(e)
    return None


# Honest: each call's words final after it, the next call's untouched.
oc, plan = batch(1, lambda i, role: 2 if role == "post" else 1)
assert fails(oc, plan) is None and oc.seen["conclusive"] == 128
# A call that left its work to a later one: one word of it unwritten after its turn.
oc, plan = batch(2, lambda i, role: 1 if (role == "post" and i == 0) else (2 if role == "post" else 1))
assert "1 of the sampled output words of a call were not yet written" in fails(oc, plan)
# A call that did a later call's work early: the next call's words already written.
oc, plan = batch(3, lambda i, role: 2)
assert "were written before its turn" in (fails(oc, plan) or "")
# Stamps left out: the log keeps its poison, which no final word matches.
oc, plan = batch(4, lambda i, role: 0xA5A5A5A5)
assert fails(oc, plan) is not None
# A word the same before and after tells nothing, and is not counted.
oc, plan = batch(5, lambda i, role: 2 if role == "post" else 1)
for _, a, _ in plan["words"][:8]:
    mem[a] = 1
plan["before"] = [1] * len(plan["before"])
assert fails(oc, plan) is not None or oc.seen["conclusive"] < 128

# Eager batches: the words a kernel process read after its secret calls against the final ones.
oc = order_check.OrderCheck(Data())
stamps = oc.eager_plan(40, random.Random(6))
logged = []
for k, us in stamps:
    row = [(9000 + k * 64, 32)]
    words = []
    for u in us:
        j, off = order.word_at(row, u)
        mem[row[j][0] + off] = 3 * k
        words.append([j, off, 3 * k])
    logged.append([k, words])
reply = {"outputs": [{"items": [{}]}] * 40, "stamps": logged}
oc.eager_verify(kernel, calls, reply, stamps, None, False)
logged[3][1][0][2] ^= 1
for bad in (reply, dict(reply, stamps=logged[:-1]), dict(reply, stamps=None)):
    try:
        oc.eager_verify(kernel, calls, bad, stamps, None, False)
        raise AssertionError("an eager batch whose words differ or are missing passed")
    except CallsOverlapped:
        pass
print("ok")
