"""A kernel process: imports one kernel module and calls it on what the evaluator sends.

It runs as an unprivileged user of its own, with a scratch directory and nothing else
writable. Nothing it does is trusted: the evaluator times it from outside, checks every
output against its own reference, and stops the process between calls. This file only does
the work of a kernel process; the kernel's code may replace any of it, to no gain.

Arguments: the fds of the requests (length-prefixed JSON), of the replies, of the shared
memory where inputs are written and outputs are expected (CPU kernels), and of a Unix socket
that carries device memory as file descriptors (GPU kernels: gpu.py). A kernel process forked
by the evaluator's zygote (zygote.py) runs Child(...).serve() with the same four.
"""
import mmap
import os
import sys
import traceback



def _error(e):
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    return text[-2000:]


class Instances:
    """ENTRY names a class (KernelBench's `ModelNew`): the first argument of every call is the
    JSON of {"args": the constructor's arguments, "seed": the weights' seed, ...} that the
    harness made with the inputs, and the rest is what the instance is called with. One
    instance per distinct value, built on its first call with the seed set first, as
    KernelBench builds both models (so that they draw the same weights), and moved to the GPU
    on a GPU task. Construction happens on an untimed call: the compile and correctness gates
    call every configuration before it is timed."""

    def __init__(self, cls, device, compiled=None):
        self.cls = cls
        self.device = device
        self.compiled = compiled
        self.made = {}

    def __call__(self, init, *args):
        inst = self.made.get(init)
        if inst is None:
            import json
            import random

            spec = json.loads(init)
            random.seed(spec["seed"])
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.manual_seed(spec["seed"])
            inst = self.cls(*spec["args"])
            if torch is not None and isinstance(inst, torch.nn.Module):
                # Parameters need no gradient: an output that requires one cannot be shared.
                inst.requires_grad_(False)
                if self.device == "cuda":
                    inst = inst.cuda()
            if self.compiled is not None:
                import torch as compiler

                inst = compiler.compile(inst, **self.compiled)
            self.made[init] = inst
        return inst(*args)


class Child:
    def __init__(self, req, rep, shm, sock):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import wire  # noqa: E402  (the evaluator's own codec, read-only)

        self.req, self.rep, self.shm_fd, self.sock_fd = req, rep, shm, sock
        self.wire = wire
        self.fn = None
        self.shm = None
        self.gpu = None
        self.held = []
        self.graph = None  # order.Chain of the captured batch
        self.spans = []  # each captured call's outputs, (address, bytes) (gpu_child.spans)
        # Output arguments' indices (OUTPUT_ARGS), for the stamps' words.
        self.out_args = []
        # The kernel writes its output into arguments the evaluator reads back itself
        # (OUTPUT_ARGS): what a call returns is not described.
        self.in_place = False
        self.returns = False

    def map(self, size):
        if self.shm is not None:
            self.shm.close()
        self.shm = mmap.mmap(self.shm_fd, size) if size else None

    def load(self, msg):
        # A process kept between a warm evaluator's evaluations (the original's) is asked to
        # load the same module again: what it loaded and built stays.
        compiled = msg.get("compiled")
        key = (msg["source"], msg["entry"], msg.get("device"), repr(compiled), msg.get("kernel_part"), msg.get("launch"))
        self.in_place = bool(msg.get("in_place"))
        self.out_args = [int(i) for i in msg.get("output_args") or []]
        # A kernel that writes into arguments and returns an output too (`returns`): both read.
        self.returns = bool(msg.get("returns"))
        if self.fn is not None and getattr(self, "loaded", None) == key:
            return {}
        import entry  # noqa: E402  (the evaluator's own, beside this file: see __init__)

        path = msg["source"]
        sys.path.insert(0, os.path.dirname(path))
        module = entry.load_module(path, bool(msg.get("kernel_part")))
        fn = getattr(module, msg["entry"], None)
        if not callable(fn):
            raise AttributeError(f"{msg['source_rel']} defines no callable `{msg['entry']}`")
        if msg.get("launch"):
            self.fn = entry.Launch(fn)
        elif isinstance(fn, type):
            self.fn = Instances(fn, msg.get("device"), compiled)
        elif compiled is not None:
            # The original compiled by torch.compile (a baseline of the evaluator's, never the
            # kernel under test): compiled on its first call, which is untimed.
            import torch

            self.fn = torch.compile(fn, **compiled)
        else:
            self.fn = fn
        if msg.get("device") == "cuda":
            import gpu_child  # noqa: E402

            import socket

            self.gpu = gpu_child.ChildSide(socket.socket(fileno=self.sock_fd))
        self.loaded = key
        return {}

    def run(self, msg):
        """Runs every call of the batch; the reply is sent after the last one is done."""
        self.held = []
        outputs = []
        stamps = {}
        logged = []
        if self.gpu is not None:
            self.gpu.begin()
            stamps = {int(k): us for k, us in msg.get("stamps") or []}
        for idx, call in enumerate(msg["calls"]):
            if "slot" in call:
                args = self.gpu.args(call["slot"])
            else:
                off, n = call["in"]
                args = self.wire.decode_all(self.shm[off:off + n])
            result = self.fn(*args)
            if self.gpu is not None:
                # After a few secret calls, words of the call's outputs, read at once: the read
                # waits for the work queued on the stream the calls run on, not for work left
                # on a side stream, and a call whose work goes on after it returned (beside
                # the next calls) is seen (order_check.py).
                if idx in stamps:
                    row = self.gpu.spans(call["slot"], result, self.out_args, self.returns)
                    logged.append([idx, self.gpu.read_words(row, stamps[idx])])
            if self.in_place and not self.returns:
                result = None
            if self.gpu is not None:
                self.held.append(result)
            else:
                off, cap = call["out"]
                enc = self.wire.encode(result)
                if len(enc) + 8 > cap:
                    raise ValueError(f"output of {len(enc)} bytes is larger than expected")
                self.shm[off:off + 8] = len(enc).to_bytes(8, "little")
                self.shm[off + 8:off + 8 + len(enc)] = enc
        if self.gpu is not None:
            self.gpu.synchronize()
            outputs = [self.gpu.describe(r) for r in self.held]
            if stamps:
                return {"outputs": outputs, "stamps": logged}
        return {"outputs": outputs}

    def capture(self, msg):
        """Captures each of the batch's calls as a CUDA graph of its own over its slot (whose
        inputs are not written yet), in a chain arena builds once it knows where its stamps go
        (`order`; order.py says why). A kernel that cannot be captured (it synchronizes,
        reads a value back, ...) says why, and is timed eagerly."""
        import order

        self._drop_chain()
        self.gpu.begin()
        try:
            chain = order.Chain(self.gpu.graphs())
            self.graph = chain
            results = chain.capture(self.fn, [self.gpu.args(call["slot"]) for call in msg["calls"]])
            outs = [None if self.in_place and not self.returns else r for r in results]
            self.spans = [self.gpu.spans(call["slot"], r, self.out_args, self.returns) for call, r in zip(msg["calls"], results)]
            # Capturing may have mapped other memory where torch's was: an address may now be
            # other memory than the one shared. The outputs stay where they are on every
            # launch, so they are described here, outside the timed request.
            self.gpu.forget_shared()
            described = [self.gpu.describe(r) for r in outs]
        except Exception as e:
            self._drop_chain()
            why = (_error(e).splitlines() or [""])[0]
            return {"captured": False, "why": why, "kind": type(e).__name__}
        self.held = outs
        return {"captured": True, "outputs": described}

    def order(self, msg):
        """Builds the captured batch's chain with arena's stamps where the evaluator drew them
        (each [k, words, log offset]: after call k, the words [call, output, byte offset],
        call -1 for none) and launches it once, so that its first launch is not timed."""
        if self.graph is None:
            raise RuntimeError("no graph was captured")
        log = self.gpu.log[0]
        stamps = []
        for k, words, off in msg["stamps"]:
            addrs = []
            for i, (call, j, byte) in enumerate(words):
                if call < 0:
                    addrs.append(log + off + 4 * i)
                else:
                    base, n = self.spans[call][j]
                    if not -4 < byte < n:
                        raise ValueError("a stamp's word lies outside its output")
                    addrs.append(base + byte)
            stamps.append((k, addrs, off))
        try:
            self.graph.build(log, stamps, bool(msg.get("flat", True)))
            self.graph.launch()
        except Exception as e:
            self._drop_chain()
            why = (_error(e).splitlines() or [""])[0]
            return {"ordered": False, "why": why, "kind": type(e).__name__}
        return {"ordered": True}

    def replay(self, msg):
        """Launches the captured batch; the reply (empty: the outputs were described when
        captured, and stay where they are) is sent once the GPU has finished it."""
        if self.graph is None or self.graph.exe is None:
            raise RuntimeError("no graph was captured")
        self.graph.launch()
        return {}

    def _drop_chain(self):
        if self.graph is not None:
            self.graph.close()
        self.held, self.graph, self.spans = [], None, []

    def handle(self, msg):
        """One request's reply. The kernel's failure is reported in it, never fatal here."""
        op = msg.get("op")
        try:
            if op == "map":
                self.map(msg["size"])
                reply = {}
            elif op == "load":
                reply = self.load(msg)
            elif op == "gpu_setup":
                reply = self.gpu.setup(msg)
            elif op == "run":
                reply = self.run(msg)
            elif op == "capture":
                reply = self.capture(msg)
            elif op == "order":
                reply = self.order(msg)
            elif op == "replay":
                reply = self.replay(msg)
            elif op == "release":
                if self.graph is not None or msg.get("unmapped"):
                    # The graph's memory goes back to torch, or the evaluator no longer maps
                    # what was sent: the next output is shared anew.
                    self.gpu.forget_shared()
                self._drop_chain()
                if msg.get("empty_cache") and self.gpu is not None:
                    # A large case: the outputs' memory goes back to the device, for the
                    # other kernel's pool and outputs (gpu.py, GpuData._make_room).
                    import torch

                    torch.cuda.empty_cache()
                reply = {}
            elif op == "gpu_drop" and self.gpu is not None:
                self._drop_chain()
                reply = self.gpu.drop()
            else:
                reply = {"error": f"unknown op {op}"}
            reply.setdefault("ok", "error" not in reply)
            if self.gpu is not None and reply["ok"]:
                # Memory the outputs lie in, new to the evaluator: sent before the reply.
                shared = self.gpu.send_shared()
                if shared:
                    reply["shared"] = shared
        except BaseException as e:
            reply = {"ok": False, "error": _error(e)}
        return reply

    def serve(self):
        wire = self.wire
        while True:
            try:
                msg = wire.recv(self.req)
            except EOFError:
                return
            if msg.get("op") == "exit":
                return
            wire.send(self.rep, self.handle(msg))


if __name__ == "__main__":
    os.chdir(os.environ.get("HOME", "/"))
    Child(*(int(a) for a in sys.argv[1:5])).serve()
