#!/usr/bin/env bash
# Benchmark: the full lifecycle (create, start, wait, delete) of a container running /bin/true
# from the same testbase image, N times each, via arena-runtime and via `ctr run --rm`, side by
# side on one private containerd. Prints both and the ratio. Needs root, containerd, runc.
# usage: ci/bench/container-lifecycle.sh [N]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
n=${1:-50}
work=$(mktemp -d /tmp/arena-bench-XXXX)
cd "$root"
cargo build --release --locked -q -p arenactl
cargo build --release --locked -q -p arena-runtime --example lifecycle
arenactl=$root/target/release/arenactl
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$root/target/arena-debs}
bash ci/fetch-debs.sh images/testbase.toml "$ARENA_DEB_DIR"
sock=$(bash ci/containerd.sh start "$work/ctd")
cleanup() {
  bash "$root/ci/containerd.sh" stop "$work/ctd"
  rm -rf "$work"
}
trap cleanup EXIT
$arenactl lock --store "$work/store" --out "$work/cpu.lock" >/dev/null 2>&1
$arenactl image load --image-lock "$work/cpu.lock" --store "$work/store" --containerd "$sock" >/dev/null
"$root/target/release/examples/lifecycle" "$sock" arena "$work/cpu.lock" testbase 3 >/dev/null  # warm up
arena_out=$("$root/target/release/examples/lifecycle" "$sock" arena "$work/cpu.lock" testbase "$n")
ctr="ctr --address $sock -n arena"
$ctr run --rm testbase warm /bin/true
s=$(date +%s.%N)
for i in $(seq 1 "$n"); do $ctr run --rm testbase "ctr-$i" /bin/true; done
e=$(date +%s.%N)
ctr_ms=$(echo "scale=1; 1000 * ($e - $s) / $n" | bc)
arena_ms=$(echo "$arena_out" | sed -E 's/.* ([0-9.]+) ms each.*/\1/')
echo "$arena_out"
echo "ctr run --rm: $n containers, $ctr_ms ms each"
echo "arena / ctr: $(echo "scale=2; $arena_ms / $ctr_ms" | bc)x   (target <= 1.0)"
