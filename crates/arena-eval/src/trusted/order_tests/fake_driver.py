"""A stand-in for the CUDA driver's graph calls (order.GraphDriver's library): graphs as lists
of nodes and edges, kernel nodes keeping their launch's gridDimX as a mark, a type per node
(0 kernel, 1 a memory copy, 4 a child graph), and attributes to refuse inlining on."""
import ctypes
import sys

sys.path.insert(0, sys.argv[1])
import order  # noqa: E402


def _v(x):
    return x.value if hasattr(x, "value") else x


def _obj(a):
    return a._obj if hasattr(a, "_obj") else a


class Lib:
    def __init__(self):
        self.graphs, self.params, self.types, self.attrs, self.next = {}, {}, {}, {}, 100

    def _new(self):
        self.next += 1
        return self.next

    def graph(self, nodes, edges, types=None):
        g = self._new()
        self.graphs[g] = {"nodes": list(nodes), "edges": list(edges)}
        for n in nodes:
            self.params[n] = n
            self.types[n] = (types or {}).get(n, 0)
        return g

    def cuGraphCreate(self, out, flags):
        g = self._new()
        self.graphs[g] = {"nodes": [], "edges": []}
        _obj(out).value = g
        return 0

    def cuGraphGetNodes(self, g, arr, n):
        nodes = self.graphs[_v(g)]["nodes"]
        if arr is not None:
            for i, x in enumerate(nodes):
                arr[i] = x
        _obj(n).value = len(nodes)
        return 0

    def cuGraphGetEdges(self, g, a, b, n):
        edges = self.graphs[_v(g)]["edges"]
        if a is not None:
            for i, (x, y) in enumerate(edges):
                a[i], b[i] = x, y
        _obj(n).value = len(edges)
        return 0

    def cuGraphNodeGetType(self, node, t):
        _obj(t).value = self.types[_v(node)]
        return 0

    def cuGraphKernelNodeGetAttribute(self, node, attr, value):
        for i, w in enumerate(self.attrs.get((_v(node), attr), [])):
            ctypes.c_uint.from_buffer(value, 4 * i).value = w
        return 0

    def get_params(self, node, p):
        _obj(p).gridDimX = self.params[_v(node)]
        return 0

    def add_kernel(self, out, g, deps, n, p):
        node = self._new()
        graph = self.graphs[_v(g)]
        graph["nodes"].append(node)
        graph["edges"] += [(deps[i], node) for i in range(n)]
        # arena's stamp by its function (7), a copied node by the mark its launch carried
        self.params[node] = 7 if _obj(p).func == 7 else _obj(p).gridDimX
        self.types[node] = 0
        _obj(out).value = node
        return 0

    def cuGraphAddDependencies(self, g, a, b, n):
        self.graphs[_v(g)]["edges"] += [(a[i], b[i]) for i in range(n)]
        return 0

    def cuGraphAddChildGraphNode(self, out, g, deps, n, child):
        node = self._new()
        graph = self.graphs[_v(g)]
        graph["nodes"].append(node)
        graph["edges"] += [(deps[i], node) for i in range(n)]
        self.types[node], self.params[node] = 4, ("child", _v(child))
        _obj(out).value = node
        return 0

    def cuGraphDestroy(self, g):
        return 0

    def cuGraphInstantiateWithFlags(self, out, g, flags):
        _obj(out).value = 1
        return 0


class Cu:
    def __init__(self, lib):
        self.lib = lib

    def check(self, rc, what):
        assert rc == 0, what


def graph_driver(lib):
    """An order.GraphDriver over `lib`, its stamp kernel marked 7."""
    gd = order.GraphDriver.__new__(order.GraphDriver)
    gd.cu = Cu(lib)
    gd._add_kernel, gd._params, gd._get_kernel = lib.add_kernel, order._KernelNodeParamsV2, lib.get_params
    gd.stamp_fn = ctypes.c_void_p(7)
    return gd


def parent_of(lib, chain):
    """(nodes, edges) of the chain's graph, each node as its mark."""
    g = lib.graphs[chain.parent]
    mark = lib.params
    return [mark[n] for n in g["nodes"]], sorted(((mark[a], mark[b]) for a, b in g["edges"]), key=repr)
