"""Attacks: arena's chain left out, by patching arena's own code in the kernel process
(order.py's Chain.build): the calls' graphs become child nodes with no order between them, and
no stamp is put in. Every output is computed honestly; the calls run side by side.
Expected: fails performance: the log arena's stamps write still holds the evaluator's poison
(CallsOverlapped)."""
import order


def _build(self, log, stamps, flat=True):
    gd = self.gd
    self.parent = gd.create()
    for child in self.children:
        gd.add_child(self.parent, None, child)
    for child in self.children:
        gd.destroy(child)
    self.children = []
    self.exe = gd.instantiate(self.parent)


order.Chain.build = _build


install(lambda f: f)
