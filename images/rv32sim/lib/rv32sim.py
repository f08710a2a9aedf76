"""Compile a C kernel for RV32IM and time it on rv32sim (verilated PicoRV32).

The simulator counts clock cycles of a real RTL core with a fixed one-wait-
state memory, so the numbers are deterministic and comparable between
kernels (see tb/sim_main.cpp in the sources for the timing model).

Memory map (must agree with runtime/crt0.S, runtime/link.ld and the
testbench): program image at 0 (below ARGS_ADDR), 8 argument words at
ARGS_ADDR, input/output arrays from DATA_ADDR up, stack down from MEM_SIZE.
"""

import json
import os
import subprocess

import numpy as np

ROOT = os.environ.get("RV32SIM_ROOT", "/opt/rv32sim")
SIM = os.path.join(ROOT, "bin", "rv32sim")
CRT0 = os.path.join(ROOT, "lib", "crt0.S")
LINK_LD = os.path.join(ROOT, "lib", "link.ld")

CC = "riscv64-unknown-elf-gcc"
OBJCOPY = "riscv64-unknown-elf-objcopy"
# The single source of the compile flags.  Builtins stay enabled (gcc may
# emit memcpy/memset calls regardless, so kernels needing them must define
# them); libgcc supplies the helpers rv32im lacks (e.g. 64-bit division).
# The linker script defines __global_pointer$, so relaxation is allowed.
CFLAGS = [
    "-march=rv32im",
    "-mabi=ilp32",
    "-O2",
    "-ffreestanding",
    "-nostdlib",
    "-nostartfiles",
]
LIBS = ["-lgcc"]

MEM_SIZE = 0x01000000
ARGS_ADDR = 0x00100000
DATA_ADDR = 0x00100100
EXIT_ADDR = 0x10000000
STACK_RESERVE = 0x00100000  # 1 MiB below MEM_SIZE is left to the stack
MAX_ARGS = 8
ALIGN = 64
# Simulated time at a nominal 100 MHz clock, for reports that read milliseconds: their ratios
# are the cycle ratios (the cycles are reported too).
CYCLES_PER_MS = 100_000


class BuildError(Exception):
    """The kernel failed to compile or link; the message is the tool output."""


class SimError(Exception):
    """The simulation ended other than by the exit store (trap/fault/timeout)."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result or {}
        self.status = self.result.get("status")


def _trim(text, limit=4000):
    text = text if isinstance(text, str) else text.decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2 :]


def build(kernel_c, out_dir, entry, extra_cflags=(), timeout=120, run=subprocess.run):
    """Compile crt0 + kernel_c with entry point `entry`; return kernel.bin's path.

    Every step, making `out_dir` too, goes through `run`: arena's evaluator runs them as the
    kernel's own user, in a directory the evaluator itself cannot enter."""
    if not entry.isidentifier():
        raise ValueError(f"bad entry name {entry!r}")
    elf = os.path.join(out_dir, "kernel.elf")
    binary = os.path.join(out_dir, "kernel.bin")
    steps = [
        ["mkdir", "-p", out_dir],
        [CC, *CFLAGS, *extra_cflags, f"-DARENA_ENTRY={entry}", "-T", LINK_LD,
         CRT0, kernel_c, *LIBS, "-o", elf],
        [OBJCOPY, "-O", "binary", elf, binary],
    ]
    for argv in steps:
        try:
            p = run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise BuildError(f"{argv[0]} timed out after {timeout}s") from e
        if p.returncode != 0:
            raise BuildError(_trim((p.stderr or "") + (p.stdout or "")) or
                             f"{argv[0]} exited with {p.returncode}")
    return binary


def _nbytes(shape, dtype):
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def layout(inputs, outputs):
    """Addresses of each input then each output, 64-byte aligned from DATA_ADDR."""
    sizes = [a.nbytes for a in inputs] + [_nbytes(s, d) for s, d in outputs]
    addrs, addr = [], DATA_ADDR
    for size in sizes:
        addr = (addr + ALIGN - 1) // ALIGN * ALIGN
        addrs.append(addr)
        addr += size
    if addr > MEM_SIZE - STACK_RESERVE:
        raise ValueError(f"arrays need {addr - DATA_ADDR} bytes, more than the "
                         f"{MEM_SIZE - STACK_RESERVE - DATA_ADDR} available")
    return addrs


def run(program_bin, inputs, outputs, scalars, workdir, max_cycles=200_000_000,
        timeout=600, run=subprocess.run):
    """Run a built kernel; return ([output arrays], cycles).

    Kernel arguments a0..a7: input addresses, output addresses, then scalars
    (ints, passed as 32-bit two's complement).
    """
    inputs = [np.ascontiguousarray(a) for a in inputs]
    outputs = [(tuple(s) if np.ndim(s) else (int(s),), np.dtype(d)) for s, d in outputs]
    nargs = len(inputs) + len(outputs) + len(scalars)
    if nargs > MAX_ARGS:
        raise ValueError(f"{nargs} kernel arguments, at most {MAX_ARGS} fit in a0..a7")
    for a in inputs:
        if a.dtype.byteorder == ">":  # the core is little-endian
            raise ValueError("big-endian input arrays are not supported")
    addrs = layout(inputs, outputs)
    args = addrs + [int(s) & 0xFFFFFFFF for s in scalars]
    args += [0] * (MAX_ARGS - len(args))

    os.makedirs(workdir, exist_ok=True)
    argv = [SIM, os.path.abspath(program_bin), "--max-cycles", str(int(max_cycles))]
    args_file = os.path.join(workdir, "args.bin")
    np.asarray(args, dtype="<u4").tofile(args_file)
    argv += ["--load", f"{ARGS_ADDR:#x}={args_file}"]
    for i, (a, addr) in enumerate(zip(inputs, addrs)):
        path = os.path.join(workdir, f"in{i}.bin")
        with open(path, "wb") as f:
            f.write(a.tobytes())
        argv += ["--load", f"{addr:#x}={path}"]
    out_paths = []
    for i, ((shape, dtype), addr) in enumerate(zip(outputs, addrs[len(inputs):])):
        path = os.path.join(workdir, f"out{i}.bin")
        out_paths.append(path)
        argv += ["--dump", f"{addr:#x}:{_nbytes(shape, dtype)}={path}"]

    try:
        p = run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise SimError(f"rv32sim exceeded the {timeout}s wall-clock limit",
                       {"status": "wall-timeout"}) from e
    lines = (p.stdout or "").strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise SimError(f"rv32sim exited with {p.returncode} and no result: "
                       f"{_trim(p.stderr or '', 1000)}", {"status": "error"}) from None
    status = result.get("status")
    if status != "exit" or p.returncode != 0:
        detail = ", ".join(f"{k}={v:#x}" if k in ("pc", "addr") else f"{k}={v}"
                           for k, v in result.items() if k != "status")
        raise SimError(f"simulation ended with status {status}: {detail}", result)

    arrays = []
    for (shape, dtype), path in zip(outputs, out_paths):
        arrays.append(np.fromfile(path, dtype=dtype.newbyteorder("<")).reshape(shape))
    return arrays, int(result["cycles"])
