"""Whose memory a case lacked, when the device's memory ran out beside a kernel.

An out-of-memory error raised while the gates run used to end the evaluation as its own failure
(`setup 96`), which the runner records as an infrastructure error and the report leaves out.
A candidate could use that: a kernel whose process holds most of the device's memory (a tensor
kept at import, deaf to `gpu_drop`) made every evaluation of it fail that way, so a wrong or
slow kernel was never scored at all. The kernel's own word on what it holds cannot be taken,
so the evaluator measures it: it kills each kernel's processes in turn and reads how much of
the device comes back (`cuMemGetInfo`, device-wide, is the driver's count, not the process's).

What is not counted against a process: the evaluator's input pools it was given (the
evaluator's own allocations; they stay) and nothing else. Before the kills, the evaluator
drops its own mappings of the outputs every kernel sent, so memory a kernel hid behind an
output (a huge allocation with a small output in it) is counted as the kernel's.

The verdict: the judged kernel (the last) is at fault when its processes held more than every
other kernel's by more than MARGIN; then the gate under way fails, naming both sizes. Else the
evaluation fails as before, with the sizes in its record: a case that does not fit beside the
original's own footprint is never the candidate's fault."""
import time

import jail

# Two processes of the same kernel differ by their torch and Triton contexts' sizes and by
# what torch's allocator happened to keep (docs/benchmarks.md has the sizes measured on an
# H100). Past this, one kernel holds memory the other does not.
MARGIN = 512 << 20
# A killed process's device memory is the driver's again within its exit; large ones take
# longer. The reading is taken once it holds still this long, or after SETTLE_S.
STILL_S = 0.1
SETTLE_S = 5.0
POLL_S = 0.02


def gib(n):
    return f"{n / 2**30:.2f}"


def _free(torch):
    return torch.cuda.mem_get_info()[0]


def _settled(torch):
    """The device's free bytes once they stop changing (at most SETTLE_S)."""
    end = time.monotonic() + SETTLE_S
    last, since = _free(torch), time.monotonic()
    while time.monotonic() < end:
        time.sleep(POLL_S)
        now = _free(torch)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= STILL_S:
            break
    return last


def footprints(kernels, data, torch):
    """Each kernel's device memory (role -> bytes): what the device gets back when every
    process of its user is killed. The kernels are dead afterwards (their `close` still
    runs, as for any ended evaluation)."""
    maps = getattr(data, "maps", None)
    for k in kernels:
        if maps is not None:
            maps.close(k.role)
        k.drop_shared()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    held = {}
    for k in kernels:
        before = _settled(torch)
        jail.kill_all(k.uid)
        held[k.role] = max(0, _settled(torch) - before)
    return held


def blame(kernels, data, torch):
    """(why, held): `why` says that the judged kernel's memory is what the case lacked, or is
    None where it is not; `held` is every kernel's footprint in bytes, for the record."""
    if not kernels:
        return None, {}
    held = footprints(kernels, data, torch)
    judged = kernels[-1].role
    mine = held[judged]
    others = max([b for r, b in held.items() if r != judged], default=0)
    if mine > others + MARGIN:
        why = (
            f"out of device memory while the {judged} kernel's processes held {gib(mine)} GiB of the device "
            f"(the other kernel's: {gib(others)} GiB); the case does not fit beside it"
        )
        return why, held
    return None, held
