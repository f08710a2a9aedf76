"""In the evaluator: whether a timed GPU batch's calls ran one after another (order.py is the
kernel process's side, which chains the calls' graphs and puts arena's stamps between them).

Before the batch's graph is built (after every call was captured, so that nothing the kernel
ran while capturing could see them), the evaluator draws from its secret where stamps go:
after call k, for a few k, each copying words of call k's outputs and of call k+1's into a log
in the evaluator's own memory. It reads the same words itself before the batch is sent (their
values "before") and after its outputs were checked ("final"). For each stamp:

- a word of call k's output must already hold its final value: a call that left its work to
  a later one (its output handed back unwritten, the work done beside the next calls) is
  caught there;
- a word of call k+1's output must still hold its value from before: a call that did a later
  call's work early (one launch for the whole batch, its outputs written ahead) is caught.

A word whose value before equals its final one tells nothing either way, and is not counted.
A stamp missing from the log (a patched launch that leaves them out) leaves the log's poison,
which no final value matches. A kernel wrong on a share f of its calls in one of these ways
passes a batch with probability about (1 - f) ** stamps, and a case has many batches.

What stamps cannot see: a kernel that patches this process's code to leave the chain out and
writes the log itself, and a call that computes later calls' results into memory of its own
and only copies each out in its turn (docs/trusted-evaluation.md, "What is left")."""
from gpu_errors import CallsOverlapped
from order import STAMP_WORDS, word_at

# Stamps per timed batch: a call that defers its work escapes one stamp with the chance that
# the stamp is not right after it, and all of a batch's with (1 - STAMPS / calls) per call.
STAMPS = 16
LOG_BYTES = 2 << 20  # the evaluator's log memory per kernel (one allocation's granularity)
POISON_BYTE = 0xA5


class OrderCheck:
    def __init__(self, data, stamps=STAMPS):
        self.data = data
        self.stamps = stamps
        # What the checks saw, for the evaluator's record: stamped batches, words compared,
        # words that told something.
        self.seen = {"batches": 0, "stamps": 0, "words": 0, "conclusive": 0}

    def plan(self, kernel, calls, described, rng, output_args, returns=False):
        """Where the stamps of a batch of `calls` go and what each reads, drawn from `rng`
        (the evaluator's secret): the request that tells the kernel process (its own addresses
        are its to work out, from each call's outputs, spans and offsets alike), and the
        evaluator's addresses of the same words. None for a batch of one call."""
        n = len(calls)
        if n < 2 or self.stamps <= 0:
            return None
        spans = self._spans(kernel, calls, described, output_args, returns)
        log = self.data.state[kernel.role]["log"]
        after = sorted(rng.sample(range(n - 1), min(self.stamps, n - 1)))
        request, words = [], []
        half = STAMP_WORDS // 2
        for s, k in enumerate(after):
            picks = []
            for call, role in [(k, "post")] * half + [(k + 1, "pre")] * half:
                pick = self._pick(spans[call], rng)
                if pick is None:
                    # No output bytes to read (the call returned values): the stamp reads its
                    # own log, and the word tells nothing.
                    picks.append([-1, 0, 0])
                    words.append((role, None, log + s * 4 * STAMP_WORDS + 4 * len(picks) - 4))
                    continue
                j, off = pick
                picks.append([call, j, off])
                words.append((role, spans[call][j][0] + off, log + s * 4 * STAMP_WORDS + 4 * len(picks) - 4))
            request.append([k, picks, s * 4 * STAMP_WORDS])
        return {
            "request": {"op": "order", "stamps": request},
            "words": words,
            "log": (log, 4 * STAMP_WORDS * len(after)),
            "before": None,
            "count": len(after),
        }

    def _spans(self, kernel, calls, described, output_args, returns):
        """(address, bytes) of each output of each call, as order.py's `spans` lists them: the
        output arguments in the call's slot first, then the tensors it returned."""
        s = self.data.samples
        out = []
        for k, call in enumerate(calls):
            row = []
            if output_args:
                row += s._slot_spans(kernel, call, output_args)
            if not output_args or returns:
                row += s._reply_spans(kernel, [call], [described[k]])[0] if described else []
            out.append(row)
        return out

    @staticmethod
    def _pick(row, rng):
        return word_at(row, rng.random())

    def arm(self, plan):
        """After the batch's inputs are written and before it is sent (every kernel process
        stopped): the log poisoned, and the words read as they are before."""
        if plan is None:
            return
        log, size = plan["log"]
        self.data.cu.fill(log, POISON_BYTE, size)
        import torch

        torch.cuda.current_stream().synchronize()
        plan["before"] = self.data.guard.gather([a for _, a, _ in plan["words"] if a is not None])

    def verify(self, plan):
        """After the batch's outputs were checked: each stamp's words against their values
        before and final; CallsOverlapped if a call's output was unwritten after it, or a
        later call's written before it."""
        if plan is None:
            return
        addrs = [a for _, a, _ in plan["words"] if a is not None]
        final = iter(self.data.guard.gather(addrs))
        before = iter(plan["before"])
        logged = self.data.guard.gather([at for _, _, at in plan["words"]])
        late = early = conclusive = 0
        for (role, addr, _), got in zip(plan["words"], logged):
            if addr is None:
                continue
            b, f = next(before), next(final)
            if b == f:
                continue
            conclusive += 1
            if role == "post" and got != f:
                late += 1
            elif role == "pre" and got != b:
                early += 1
        seen = self.seen
        seen["batches"] += 1
        seen["stamps"] += plan["count"]
        seen["words"] += len(plan["words"])
        seen["conclusive"] += conclusive
        if late or early:
            raise CallsOverlapped(
                f"the batch's calls did not run one after another: {late} of the sampled output words "
                f"of a call were not yet written when the next call began, {early} of a later call's "
                f"were written before its turn ({conclusive} words compared)"
            )

    # Eagerly timed batches (a kernel that cannot be captured): the kernel process waits for
    # the whole context after each call (child.py), and reads, after a few secret calls, words
    # of that call's outputs; the evaluator compares them with the outputs' final words.

    def eager_plan(self, n, rng):
        """The calls of an eager batch of `n` after which words are read, and where (fractions
        of each one's output bytes), drawn from `rng`: the run request's `stamps`."""
        if n < 2 or self.stamps <= 0:
            return None
        calls = sorted(rng.sample(range(n), min(self.stamps, n)))
        return [[k, [rng.random() for _ in range(STAMP_WORDS // 2)]] for k in calls]

    def eager_verify(self, kernel, calls, reply, stamps, output_args, returns):
        """After an eager batch's outputs were checked: each word the kernel process read after
        its call is the output's final word, or that call's work went on after it returned."""
        if not stamps:
            return
        got = reply.get("stamps")
        if not isinstance(got, list) or len(got) != len(stamps):
            raise CallsOverlapped("the kernel process did not read its calls' outputs after each call")
        items = reply.get("outputs", [])
        addrs, values = [], []
        for (k, us), entry in zip(stamps, got):
            if not (isinstance(entry, list) and len(entry) == 2 and entry[0] == k and isinstance(entry[1], list) and len(entry[1]) == len(us)):
                raise CallsOverlapped("the kernel process read other words than the ones asked")
            row = self._spans(kernel, [calls[k]], [items[k]] if k < len(items) else None, output_args, returns)[0]
            for u, word in zip(us, entry[1]):
                want = word_at(row, u)
                if want is None:
                    continue
                if not (isinstance(word, list) and len(word) == 3 and tuple(word[:2]) == want and type(word[2]) is int):
                    raise CallsOverlapped("the kernel process read other words than the ones asked")
                addrs.append(row[want[0]][0] + want[1])
                values.append(word[2])
        final = self.data.guard.gather(addrs) if addrs else []
        late = sum(1 for v, f in zip(values, final) if v != f)
        self.seen["eager_words"] = self.seen.get("eager_words", 0) + len(addrs)
        if late:
            raise CallsOverlapped(
                f"the batch's calls did not run one after another: {late} of {len(addrs)} sampled output "
                "words were not yet written when their call returned"
            )
