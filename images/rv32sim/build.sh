#!/bin/sh
# Build rv32sim (PicoRV32 verilated + testbench) and install it with its
# runtime under $OUT.  Runs as root without network in a chroot where the
# sources are at /src (read-only) and /build is writable scratch.
#
# Needs (Debian bookworm): verilator (a perl script; its make rules run
# python3 for verilator_includer), make, g++ (with binutils' as/ld/ar),
# and basic file tools (busybox's will do).  Deterministic: rebuilding gives
# byte-identical outputs, even from other $SRC/$BUILD paths (no timestamps
# embedded; see below for paths).  The binary links libstdc++/libgcc statically: at run time it needs libc6.
set -eu

SRC=${SRC:-/src}
BUILD=${BUILD:-/build}
OUT=${OUT:-/opt/rv32sim}

export SOURCE_DATE_EPOCH=0
export LC_ALL=C
export TZ=UTC
umask 022

OBJ="$BUILD/obj"
rm -rf "$OBJ"
mkdir -p "$OBJ"

# Core configuration (see rtl/README.md).  ENABLE_FAST_MUL/ENABLE_DIV add
# the PCPI multiplier/divider, so the core implements RV32IM.
PARAMS="-GENABLE_COUNTERS=1 -GENABLE_REGS_DUALPORT=1 -GBARREL_SHIFTER=1
 -GCOMPRESSED_ISA=0 -GENABLE_MUL=0 -GENABLE_FAST_MUL=1 -GENABLE_DIV=1
 -GCATCH_MISALIGN=1 -GCATCH_ILLINSN=1 -GENABLE_IRQ=0 -GPROGADDR_RESET=0"

# AR by its path: Debian's static busybox, the builder's sh, runs its own `ar` applet for a
# bare `ar` (it prefers applets), which cannot make an archive.
# OPT_* are Verilator's make variables for the C++ optimisation level of
# the generated model (default -Os); -O3 alone only affects Verilator.
# Run from $SRC with relative source names: Verilator embeds the .v file
# name in the model, so this keeps the binary independent of where $SRC is.
cd "$SRC"
# shellcheck disable=SC2086
verilator --cc --exe --build -O3 -j 2 \
    --Mdir "$OBJ" --top-module picorv32 $PARAMS \
    -Wno-fatal -Wno-lint -Wno-style \
    --x-assign fast --x-initial unique \
    -CFLAGS "-std=c++17 -ffile-prefix-map=$BUILD=/build -ffile-prefix-map=$SRC=/src" \
    -MAKEFLAGS "OPT_FAST=-O2 OPT_SLOW=-O1 OPT_GLOBAL=-O2 AR=/usr/bin/ar" \
    -LDFLAGS "-static-libstdc++ -static-libgcc" \
    -o rv32sim \
    tb/rv32sim.vlt rtl/picorv32.v "$SRC/tb/sim_main.cpp"

# Plain cp and chmod: the builder's userland is busybox, which has no `install`.
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/share/picorv32" "$OUT/share/rv32sim"
cp "$OBJ/rv32sim" "$OUT/bin/rv32sim"
cp "$SRC/runtime/crt0.S" "$SRC/runtime/link.ld" "$SRC/lib/rv32sim.py" "$SRC/lib/rv32gates.py" "$OUT/lib/"
cp "$SRC/rtl/LICENSE" "$SRC/rtl/README.md" "$OUT/share/picorv32/"
cp "$SRC/selftest.sh" "$OUT/share/rv32sim/selftest.sh"
chmod 0755 "$OUT/bin/rv32sim" "$OUT/share/rv32sim/selftest.sh"
chmod 0644 "$OUT/lib/"* "$OUT/share/picorv32/"*
