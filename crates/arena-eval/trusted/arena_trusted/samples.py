"""The end of a timed GPU batch, as the evaluator establishes it (not the kernel process).

A kernel process says it is done by answering; nothing in it can be trusted to say so
truly (its `synchronize` may be patched away, its request handler replaced). So the batch's
window ends when the evaluator itself has read a secret sample of the batch's outputs on the
device (gpu_guard's gather, which waits behind whatever the kernel's context still runs), and
once every output is checked the same words are read again: a word that changed in between
was written after the answer, and the batch fails as deferred work.

Where the samples lie is drawn from the evaluator's secret before the batch is sent (which call,
which of its output tensors by size, where in it), so a kernel cannot finish the sampled places
first: a kernel that leaves a share f of its output bytes to be written after its answer
escapes a batch's check with probability (1 - f) ** SAMPLES at most, and a case has many
batches. Where the outputs' places are known before the batch is sent (a captured graph's,
which stay where they are; outputs written into the call's own slot), the addresses are
worked out then, and the window holds only the read.
"""

import timing
from gpu_errors import DeferredWork

# Words sampled per batch: 64 leaves a kernel that defers 5 % of its output a 4 % chance per
# batch, and a case has ten or more timed batches.
DEFAULT_SAMPLES = 64


class Samples:
    def __init__(self, data, count=DEFAULT_SAMPLES):
        self.data = data
        self.count = max(1, min(int(count), 1024))

    def plan(self, kernel, calls, described, rng, output_args, returns=False):
        """The batch's sample drawn now, before it is sent: for each word a call and a place
        among its output bytes (a fraction of them), and, where already known, its address.
        A kernel that writes arguments and returns outputs too (`returns`) has both sampled:
        work on either left until after the answer is deferred work."""
        picks = [(rng.randrange(len(calls)), rng.random()) for _ in range(self.count)]
        plan = {"picks": picks, "calls": calls, "addrs": None, "words": None, "wait_s": 0.0}
        if output_args:
            plan["addrs"] = self._addresses(picks, [self._slot_spans(kernel, c, output_args) for c in calls])
            if returns:
                plan["returned"] = [(rng.randrange(len(calls)), rng.random()) for _ in range(self.count)]
                if described is not None:
                    plan["addrs"] += self._addresses(plan.pop("returned"), self._reply_spans(kernel, calls, described))
        elif described is not None:
            plan["addrs"] = self._addresses(picks, self._reply_spans(kernel, calls, described))
        return plan

    def probe(self, kernel, plan, reply):
        """In the batch's window, once the reply is in: the sampled words, read on the device.
        An eagerly run batch's outputs are named by its reply, so their places are worked
        out here (inside the window: a kernel whose outputs take long to find pays for it)."""
        if plan["addrs"] is None:
            spans = self._reply_spans(kernel, plan["calls"], reply.get("outputs", []))
            plan["addrs"] = self._addresses(plan["picks"], spans)
        elif plan.get("returned"):
            spans = self._reply_spans(kernel, plan["calls"], reply.get("outputs", []))
            plan["addrs"] = plan["addrs"] + self._addresses(plan.pop("returned"), spans)
        addrs = plan["addrs"] or [self.data.guard.own_word]
        seconds = timing.stopwatch()
        plan["words"] = self.data.guard.gather(addrs)
        plan["wait_s"] = seconds()

    def confirm(self, plan):
        """After the outputs were checked: the sampled words read again, each the same as when
        the reply came, or the kernel's work went on after it answered."""
        addrs = plan["addrs"]
        if not addrs:
            return
        again = self.data.guard.gather(addrs)
        changed = sum(1 for a, b in zip(plan["words"], again) if a != b)
        if changed:
            raise DeferredWork(
                f"{changed} of {len(addrs)} sampled output words changed after the kernel process "
                "answered: its work went on after it said it was done"
            )

    def _slot_spans(self, kernel, call, output_args):
        """(address, bytes) of each output argument in the call's own slot."""
        st = self.data.state[kernel.role]
        base = self.data._slot_base(st, call["slot"])
        return [(base + st["layout"][i]["offset"], st["layout"][i]["bytes"]) for i in output_args]

    def _reply_spans(self, kernel, calls, described):
        """(address, bytes) of each tensor output of each call, as the kernel process
        described them (checked as the outputs are: gpu.GpuData.described)."""
        spans = []
        for item, call in zip(described, calls):
            row = []
            for d in item.get("items", []):
                if "value" not in d:
                    _, addr, n = self.data.described(kernel, d, call, tensor=False)
                    row.append((addr, n))
            spans.append(row)
        return spans

    @staticmethod
    def _addresses(picks, spans):
        """The word each pick lands on: its call's output bytes taken end to end, the byte at
        the pick's fraction of them, the 4-byte word holding it (aligned down: allocations
        start aligned, so the word never leaves the allocation)."""
        out = []
        for c, u in picks:
            if c >= len(spans):
                continue
            row = [(a, n) for a, n in spans[c] if n > 0]
            total = sum(n for _, n in row)
            if not total:
                continue
            at = int(u * total)
            for a, n in row:
                if at < n:
                    out.append((a + at) & ~3)
                    break
                at -= n
        return out
