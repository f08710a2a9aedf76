#!/bin/sh
# Self-test of an installed rv32sim: RV32SIM_ROOT (default /opt/rv32sim) must
# hold bin/rv32sim and lib/{crt0.S,link.ld,rv32sim.py}; needs python3 with
# numpy and riscv64-unknown-elf-gcc on PATH.
set -eu
RV32SIM_ROOT=${RV32SIM_ROOT:-/opt/rv32sim}
export RV32SIM_ROOT
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TMP
PYTHONPATH="$RV32SIM_ROOT/lib${PYTHONPATH:+:$PYTHONPATH}" exec python3 - <<'PY'
import os
import numpy as np
import rv32sim

tmp = os.environ["TMP"]

def kernel(name, src, entry):
    path = os.path.join(tmp, name + ".c")
    with open(path, "w") as f:
        f.write(src)
    return rv32sim.build(path, os.path.join(tmp, name), entry)

def expect_error(name, src, entry, status, **kw):
    binary = kernel(name, src, entry)
    try:
        rv32sim.run(binary, [], [], [], os.path.join(tmp, name + ".run"), **kw)
    except rv32sim.SimError as e:
        assert e.status == status, (name, str(e))
        print(f"{name}: SimError as expected: {e}")
        return
    raise AssertionError(f"{name}: expected SimError {status}")

# 1. Correctness and a cycle count for a small vector add (int32 and int64
#    multiply-accumulate, which exercises the M extension and libgcc).
add = kernel("add", """
void add(const int *a, const int *b, int *c, int n) {
    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];
}
""", "add")
rng = np.random.default_rng(0)
for n in (16, 1024):
    a = rng.integers(-2**31, 2**31, n, dtype=np.int32)
    b = rng.integers(-2**31, 2**31, n, dtype=np.int32)
    (c,), cycles = rv32sim.run(add, [a, b], [((n,), np.int32)], [n], os.path.join(tmp, "add.run"))
    assert np.array_equal(c, a + b), "add: wrong result"
    print(f"add n={n}: ok, {cycles} cycles")
    (c2,), cycles2 = rv32sim.run(add, [a, b], [((n,), np.int32)], [n], os.path.join(tmp, "add.run"))
    assert cycles2 == cycles and np.array_equal(c2, c), "add: not deterministic"

mac = kernel("mac", """
void mac(const int *a, const int *b, long long *out, int n, int d) {
    long long s = 0;
    for (int i = 0; i < n; i++) s += (long long)a[i] * b[i];
    out[0] = s; out[1] = s / d; out[2] = (a[0] * b[0]) % d;
}
""", "mac")
n, d = 64, -7
a = rng.integers(-1000, 1000, n, dtype=np.int32)
b = rng.integers(-1000, 1000, n, dtype=np.int32)
(o,), cycles = rv32sim.run(mac, [a, b], [((3,), np.int64)], [n, d], os.path.join(tmp, "mac.run"))
s = int(np.dot(a.astype(np.int64), b.astype(np.int64)))
p = int(a[0]) * int(b[0])
want = [s, int(s / d), p - d * int(p / d)]  # C truncates toward zero
assert o.tolist() == want, ("mac", o.tolist(), want)
print(f"mac n={n}: ok, {cycles} cycles")

# 2. Failure modes.
expect_error("spin", "void spin(void) { for (;;) __asm__ volatile(\"\"); }\n",
             "spin", "timeout", max_cycles=10000)
expect_error("wild", "void wild(void) { *(volatile int *)0x20000000 = 1; }\n",
             "wild", "fault")
expect_error("brk", "void brk(void) { __asm__ volatile(\"ebreak\"); }\n",
             "brk", "trap")
# (inline asm: gcc splits a store it can see is misaligned into halves)
expect_error("mis", "void mis(void) { __asm__ volatile(\"sw zero, 2(%0)\" :: \"r\"(0x00100100)); }\n",
             "mis", "trap")

# 3. Errors the host side must catch.
try:
    rv32sim.build(os.path.join(tmp, "missing.c"), os.path.join(tmp, "missing"), "f")
    raise AssertionError("build of a missing file succeeded")
except rv32sim.BuildError as e:
    print("BuildError as expected:", str(e).splitlines()[0])
try:
    rv32sim.run(add, [np.zeros(1, np.int32)] * 9, [], [], tmp)
    raise AssertionError("9 arguments accepted")
except ValueError:
    pass
print("selftest: all passed")
PY
