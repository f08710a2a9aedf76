"""In a kernel process: a timed batch's calls run one after another, as in a model's forward
pass and in a task's own harness (the evaluator's side is order_check.py).

A batch used to be one CUDA graph of all its calls, captured on one stream. Nothing in such a
graph orders one call's work after the previous call's: a kernel (or a patch of torch alone)
that forks each call onto a side stream and joins them all when the capture ends gets a graph
whose calls run side by side, every output right, and reads several times faster than its
latency (2.6-2.85x on vLLM's microsecond kernels, an H200). So each call is captured as a graph
of its own, cloned from the driver's view of the capture (not from what torch hands back, which
a patch of torch could change), and the batch is a graph that arena builds with the driver: the
calls' graphs as child nodes in a chain. A child node is done only when every node of its graph
is, joined or not, so call k+1 starts after all of call k's work has ended, whichever streams
it used. The batch is launched and waited for through the driver on a stream of arena's own.

That orders the graphs, not what a call does in them: a call can leave its work for a later
call to do (its output returned unwritten) or do a later call's work early (the inputs of the
whole batch are in place). So the chain holds stamps: at secret places (drawn by the evaluator
after every call was captured, sent with the `order` request), a small kernel of arena's
between call k and call k+1 copies sampled words of call k's outputs (they must already be
final) and of call k+1's (they must not be written yet) into memory the evaluator owns, which
checks them after the window (order_check.py). A stamp costs about a microsecond; a batch has
a few.
"""
import ctypes

STAMP_WORDS = 8  # words one stamp copies: its kernel's parameters after the log's address

PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry arena_stamp(
	.param .u64 log,
	.param .u64 a0, .param .u64 a1, .param .u64 a2, .param .u64 a3,
	.param .u64 a4, .param .u64 a5, .param .u64 a6, .param .u64 a7
)
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [log];
""" + "".join(
    f"""	ld.param.u64 	%rd2, [a{i}];
	ld.volatile.u32 	%r1, [%rd2];
	st.volatile.u32 	[%rd1+{4 * i}], %r1;
"""
    for i in range(STAMP_WORDS)
) + """	ret;
}
"""

CU_STREAM_NON_BLOCKING = 1
CAPTURE_ACTIVE = 1  # CU_STREAM_CAPTURE_STATUS_ACTIVE


def word_at(row, u):
    """The 4-byte word at fraction `u` of a call's output bytes (`row`: (address, bytes) of
    each output, taken end to end), as (output index, byte offset in it, aligned down from the
    address so that it never leaves the allocation); None where the call has no output bytes.
    The evaluator and the kernel process find the same word from the same fraction."""
    total = sum(n for _, n in row)
    if not total:
        return None
    at = min(int(u * total), total - 1)
    for j, (a, n) in enumerate(row):
        if at < n:
            return j, ((a + at) & ~3) - a
        at -= n
    return None


class NotOrdered(Exception):
    """The calls could not be captured and chained (the kernel is then timed eagerly)."""


_NODE_FIELDS = [
    ("func", ctypes.c_void_p),
    ("gridDimX", ctypes.c_uint),
    ("gridDimY", ctypes.c_uint),
    ("gridDimZ", ctypes.c_uint),
    ("blockDimX", ctypes.c_uint),
    ("blockDimY", ctypes.c_uint),
    ("blockDimZ", ctypes.c_uint),
    ("sharedMemBytes", ctypes.c_uint),
    ("kernelParams", ctypes.POINTER(ctypes.c_void_p)),
    ("extra", ctypes.POINTER(ctypes.c_void_p)),
]


class _KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v1 (the driver's `cuGraphAddKernelNode`)."""

    _fields_ = _NODE_FIELDS


class _KernelNodeParamsV2(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2 (`cuGraphAddKernelNode_v2`): a kernel handle and a context
    after v1's fields, both left empty (the function, in the current context)."""

    _fields_ = _NODE_FIELDS + [("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


class GraphDriver:
    """The driver's graph calls, through ctypes (driver.Driver's library)."""

    def __init__(self, cu):
        self.cu = cu
        lib = cu.lib
        vp, vpp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        lib.cuStreamCreate.argtypes = [vpp, ctypes.c_uint]
        lib.cuStreamSynchronize.argtypes = [vp]
        lib.cuGraphCreate.argtypes = [vpp, ctypes.c_uint]
        lib.cuGraphClone.argtypes = [vpp, vp]
        lib.cuGraphDestroy.argtypes = [vp]
        lib.cuGraphAddChildGraphNode.argtypes = [vpp, vp, vpp, ctypes.c_size_t, vp]
        # The kernel node: the v2 form where the driver has it (CUDA 12 and later), else v1.
        self._add_kernel = getattr(lib, "cuGraphAddKernelNode_v2", None)
        self._params = _KernelNodeParamsV2
        if self._add_kernel is None:
            self._add_kernel, self._params = lib.cuGraphAddKernelNode, _KernelNodeParams
        self._add_kernel.argtypes = [vpp, vp, vpp, ctypes.c_size_t, ctypes.POINTER(self._params)]
        lib.cuGraphInstantiateWithFlags.argtypes = [vpp, vp, ctypes.c_ulonglong]
        lib.cuGraphLaunch.argtypes = [vp, vp]
        lib.cuGraphExecDestroy.argtypes = [vp]
        lib.cuModuleLoadData.argtypes = [vpp, ctypes.c_char_p]
        lib.cuModuleGetFunction.argtypes = [vpp, vp, ctypes.c_char_p]
        # The capture's graph: the CUDA 12 form where the driver has it, else CUDA 13's (which
        # adds the edges' data); either way only its status and graph are read.
        self._info_v2 = getattr(lib, "cuStreamGetCaptureInfo_v2", None)
        self._info_v3 = getattr(lib, "cuStreamGetCaptureInfo_v3", None)
        u64p, szp = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t)
        if self._info_v2 is not None:
            self._info_v2.argtypes = [vp, ctypes.POINTER(ctypes.c_int), u64p, vpp, vpp, szp]
        if self._info_v3 is not None:
            self._info_v3.argtypes = [vp, ctypes.POINTER(ctypes.c_int), u64p, vpp, vpp, vpp, szp]
        if self._info_v2 is None and self._info_v3 is None:
            raise NotOrdered("the CUDA driver has no cuStreamGetCaptureInfo")
        szp2 = ctypes.POINTER(ctypes.c_size_t)
        lib.cuGraphGetNodes.argtypes = [vp, vpp, szp2]
        lib.cuGraphGetEdges.argtypes = [vp, vpp, vpp, szp2]
        lib.cuGraphNodeGetType.argtypes = [vp, ctypes.POINTER(ctypes.c_int)]
        lib.cuGraphAddDependencies.argtypes = [vp, vpp, vpp, ctypes.c_size_t]
        lib.cuGraphKernelNodeGetAttribute.argtypes = [vp, ctypes.c_int, ctypes.c_void_p]
        self._get_kernel = getattr(lib, "cuGraphKernelNodeGetParams_v2", None) if self._params is _KernelNodeParamsV2 else None
        if self._get_kernel is None:
            self._get_kernel = lib.cuGraphKernelNodeGetParams
        self._get_kernel.argtypes = [vp, ctypes.POINTER(self._params)]
        self.stream = vp()
        cu.check(lib.cuStreamCreate(ctypes.byref(self.stream), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        self.module = vp()
        cu.check(lib.cuModuleLoadData(ctypes.byref(self.module), PTX.encode()), "cuModuleLoadData (arena's stamp)")
        self.stamp_fn = vp()
        cu.check(lib.cuModuleGetFunction(ctypes.byref(self.stamp_fn), self.module, b"arena_stamp"), "cuModuleGetFunction")

    def capturing(self):
        """The graph the stream of arena's is being captured into, or None if it is not."""
        status, cid, graph, deps, n = ctypes.c_int(), ctypes.c_uint64(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
        if self._info_v2 is not None:
            rc = self._info_v2(self.stream, ctypes.byref(status), ctypes.byref(cid), ctypes.byref(graph), ctypes.byref(deps), ctypes.byref(n))
        else:
            edges = ctypes.c_void_p()
            rc = self._info_v3(
                self.stream, ctypes.byref(status), ctypes.byref(cid), ctypes.byref(graph), ctypes.byref(deps), ctypes.byref(edges), ctypes.byref(n)
            )
        self.cu.check(rc, "cuStreamGetCaptureInfo")
        return graph.value if status.value == CAPTURE_ACTIVE and graph.value else None

    def clone(self, graph):
        out = ctypes.c_void_p()
        self.cu.check(self.cu.lib.cuGraphClone(ctypes.byref(out), ctypes.c_void_p(graph)), "cuGraphClone")
        return out.value

    def destroy(self, graph):
        self.cu.lib.cuGraphDestroy(ctypes.c_void_p(graph))

    def create(self):
        out = ctypes.c_void_p()
        self.cu.check(self.cu.lib.cuGraphCreate(ctypes.byref(out), 0), "cuGraphCreate")
        return out.value

    def add_child(self, parent, after, child):
        node = ctypes.c_void_p()
        deps = (ctypes.c_void_p * 1)(after) if after else None
        self.cu.check(
            self.cu.lib.cuGraphAddChildGraphNode(ctypes.byref(node), ctypes.c_void_p(parent), deps, 1 if after else 0, ctypes.c_void_p(child)),
            "cuGraphAddChildGraphNode",
        )
        return node.value

    def add_stamp(self, parent, after, log, addrs):
        """A stamp node after every node of `after`: copies the word at each of `addrs`
        (STAMP_WORDS) to `log` onwards."""
        values = [ctypes.c_uint64(log)] + [ctypes.c_uint64(a) for a in addrs]
        argv = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
        p = self._params(self.stamp_fn.value, 1, 1, 1, 1, 1, 1, 0, argv, None)
        return self._add_node(parent, after, p)

    def _add_node(self, parent, after, params):
        node = ctypes.c_void_p()
        deps = (ctypes.c_void_p * len(after))(*after) if after else None
        self.cu.check(
            self._add_kernel(ctypes.byref(node), ctypes.c_void_p(parent), deps, len(after), ctypes.byref(params)), "cuGraphAddKernelNode"
        )
        return node.value

    def depend(self, parent, pairs):
        """Edges `pairs` ([(from, to), ...]) in `parent`."""
        if not pairs:
            return
        a = (ctypes.c_void_p * len(pairs))(*[f for f, _ in pairs])
        b = (ctypes.c_void_p * len(pairs))(*[t for _, t in pairs])
        self.cu.check(self.cu.lib.cuGraphAddDependencies(ctypes.c_void_p(parent), a, b, len(pairs)), "cuGraphAddDependencies")

    def inline(self, parent, after, child):
        """`child`'s nodes copied into `parent`, each of its first ones after every node of
        `after`: what a child node is, without the nodes a child graph's start and end add
        (measured on an H200, a tenth of a microsecond or more a call). Only for a graph of
        kernel nodes whose launches need nothing but their parameters (no cluster, no
        cooperative or programmatic launch); None for any other (it goes in as a child node).
        Returns the copied graph's last nodes."""
        lib = self.cu.lib
        n = ctypes.c_size_t()
        self.cu.check(lib.cuGraphGetNodes(ctypes.c_void_p(child), None, ctypes.byref(n)), "cuGraphGetNodes")
        if n.value == 0:  # a call that queued no work: nothing to order
            return list(after)
        nodes = (ctypes.c_void_p * n.value)()
        self.cu.check(lib.cuGraphGetNodes(ctypes.c_void_p(child), nodes, ctypes.byref(n)), "cuGraphGetNodes")
        nodes = [nodes[i] for i in range(n.value)]
        kind = ctypes.c_int()
        value = (ctypes.c_ubyte * 64)()
        for node in nodes:
            self.cu.check(lib.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)), "cuGraphNodeGetType")
            if kind.value != 0:  # CU_GRAPH_NODE_TYPE_KERNEL
                return None
            for attr in (2, 4, 6):  # cooperative, cluster dimension, programmatic serialization
                ctypes.memset(value, 0, 64)
                if lib.cuGraphKernelNodeGetAttribute(ctypes.c_void_p(node), attr, value) != 0:
                    return None
                words = list((ctypes.c_uint * 3).from_buffer(value))
                if (attr == 4 and words[0] * max(words[1], 1) * max(words[2], 1) > 1) or (attr != 4 and words[0]):
                    return None
        e = ctypes.c_size_t()
        self.cu.check(lib.cuGraphGetEdges(ctypes.c_void_p(child), None, None, ctypes.byref(e)), "cuGraphGetEdges")
        edges = []
        if e.value:
            src = (ctypes.c_void_p * e.value)()
            dst = (ctypes.c_void_p * e.value)()
            self.cu.check(lib.cuGraphGetEdges(ctypes.c_void_p(child), src, dst, ctypes.byref(e)), "cuGraphGetEdges")
            edges = [(src[i], dst[i]) for i in range(e.value)]
        has_in = {b for _, b in edges}
        has_out = {a for a, _ in edges}
        copy = {}
        for node in nodes:
            p = self._params()
            self.cu.check(self._get_kernel(ctypes.c_void_p(node), ctypes.byref(p)), "cuGraphKernelNodeGetParams")
            copy[node] = self._add_node(parent, after if node not in has_in else [], p)
        self.depend(parent, [(copy[a], copy[b]) for a, b in edges])
        return [copy[x] for x in nodes if x not in has_out]

    def instantiate(self, graph):
        out = ctypes.c_void_p()
        self.cu.check(self.cu.lib.cuGraphInstantiateWithFlags(ctypes.byref(out), ctypes.c_void_p(graph), 0), "cuGraphInstantiate")
        return out.value

    def launch(self, exe):
        self.cu.check(self.cu.lib.cuGraphLaunch(ctypes.c_void_p(exe), self.stream), "cuGraphLaunch")
        self.cu.check(self.cu.lib.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def destroy_exec(self, exe):
        self.cu.lib.cuGraphExecDestroy(ctypes.c_void_p(exe))


class Chain:
    """A batch's calls, each captured as a graph of its own, then chained (with stamps) into
    the one graph a timed request launches."""

    def __init__(self, gd):
        self.gd = gd
        self.graphs = []  # torch's CUDAGraph of each call: they hold the calls' memory
        self.children = []  # arena's clone of each call's captured graph
        self.parent = None
        self.exe = None

    def capture(self, fn, args_list):
        """Captures `fn` on each call's arguments, one graph per call, all allocating from one
        pool (so that each call's memory is the graph's, replayed in this order). Returns what
        each call returned."""
        import torch

        ext = torch.cuda.ExternalStream(self.gd.stream.value)
        pool = torch.cuda.graph_pool_handle()
        results = []
        self.gd.cu.lib.cuCtxSynchronize()
        with torch.cuda.stream(ext):
            for args in args_list:
                g, kept = _new_graph(torch)
                self.graphs.append(g)
                g.capture_begin(pool=pool)
                clone = None
                try:
                    results.append(fn(*args))
                    graph = self.gd.capturing()
                    if graph is None:
                        raise NotOrdered("the call was not captured on arena's stream")
                    try:
                        clone = self.gd.clone(graph)
                    except Exception:
                        # A driver that will not clone a graph under capture: the same graph,
                        # once captured, where torch keeps it (the handle is the driver's).
                        if not kept:
                            raise
                finally:
                    g.capture_end()
                self.children.append(clone if clone is not None else self.gd.clone(graph))
        return results

    def build(self, log, stamps, flat=True):
        """The batch's graph: each call's graph after every node of the previous one's (its
        nodes copied in where GraphDriver.inline can, else as a child node), with a stamp
        after call k for each `stamps` entry (k, addresses, log offset); instantiated."""
        gd = self.gd
        self.parent = gd.create()
        after = {k: (addrs, off) for k, addrs, off in stamps}
        last = []
        for k, child in enumerate(self.children):
            copied = gd.inline(self.parent, last, child) if flat else None
            if copied is None:
                copied = [gd.add_child(self.parent, last[0] if len(last) == 1 else None, child)]
                if len(last) > 1:
                    gd.depend(self.parent, [(x, copied[0]) for x in last])
            last = copied
            if k in after:
                addrs, off = after[k]
                last = [gd.add_stamp(self.parent, last, log + off, addrs)]
        for child in self.children:
            gd.destroy(child)
        self.children = []
        self.exe = gd.instantiate(self.parent)

    def launch(self):
        self.gd.launch(self.exe)

    def close(self):
        for child in self.children:
            self.gd.destroy(child)
        if self.exe is not None:
            self.gd.destroy_exec(self.exe)
        if self.parent is not None:
            self.gd.destroy(self.parent)
        self.children, self.exe, self.parent = [], None, None
        for g in self.graphs:
            g.reset()
        self.graphs = []


def _new_graph(torch):
    """A CUDAGraph that keeps its captured graph uninstantiated where torch can (arena
    launches its own clone: instantiating torch's would be time for nothing), and whether it
    does."""
    try:
        return torch.cuda.CUDAGraph(keep_graph=True), True
    except TypeError:
        return torch.cuda.CUDAGraph(), False
