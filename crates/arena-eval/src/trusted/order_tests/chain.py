# Run after fake_driver.py: the batch's graph that order.Chain builds from each call's graph.
lib = Lib()
gd = graph_driver(lib)

# Call 0 forked onto two streams and never joined (two nodes, no edge); call 1 a chain of two;
# call 2 queued nothing. A stamp after calls 0 and 2.
chain = order.Chain(gd)
chain.children = [lib.graph([1, 2], []), lib.graph([3, 4], [(3, 4)]), lib.graph([], [])]
chain.build(5000, [(0, [11] * 8, 0), (2, [12] * 8, 32)])
nodes, edges = parent_of(lib, chain)
assert nodes == [1, 2, 7, 3, 4, 7], nodes
# Both of call 0's nodes come before its stamp, and the stamp before call 1: no call's work
# overlaps the next one's, joined or not.
assert edges == sorted([(1, 7), (2, 7), (7, 3), (3, 4), (4, 7)], key=repr), edges

# A call whose graph holds a memory copy, and one launched as a cluster, go in as child nodes,
# after every last node of the call before.
lib = Lib()
gd = graph_driver(lib)
chain = order.Chain(gd)
clustered = lib.graph([21], [])
lib.attrs[(21, 4)] = [2, 1, 1]
copying = lib.graph([31, 32], [], types={32: 1})
chain.children = [lib.graph([1, 2], []), copying, clustered]
chain.build(5000, [])
nodes, edges = parent_of(lib, chain)
assert nodes == [1, 2, ("child", copying), ("child", clustered)], nodes
want = [(1, ("child", copying)), (2, ("child", copying)), (("child", copying), ("child", clustered))]
assert edges == sorted(want, key=repr), edges

# word_at: the same word from the same fraction, on both sides.
row = [(1000, 10), (2002, 8)]
assert [order.word_at(row, u) for u in (0, 0.3, 0.55, 0.99)] == [(0, 0), (0, 4), (0, 8), (1, 6)]
assert order.word_at([], 0.5) is None and order.word_at([(8, 0)], 0.5) is None
print("ok")
