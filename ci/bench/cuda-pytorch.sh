#!/usr/bin/env bash
# images/cuda-pytorch.toml end to end on a machine without a GPU: fetch its pins (cached),
# build it into two empty stores (the same digests, or exit 1), lock the `cuda` set, load it
# into a private containerd and, in a container of the row_softmax task's image: import torch
# and triton, check their versions and that torch is a CUDA build, run a CPU torch op and the
# task's reference implementation on its visible shapes, and arena's harnesses for
# AgentKernelArena tasks against their kernels (ci/aka-harness-check.py), and the harnesses
# derived from the vLLM tasks' own runners (ci/aka-derived-check.py). Prints the build times.
# Without the 4.2 GB wheel set in the cache it says so and exits 0 (ARENA_FETCH=1 fetches it).
# usage: ci/bench/cuda-pytorch.sh [WORK_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"; work=$(cd "$work" && pwd)
recipe=$root/images/cuda-pytorch.toml
export ARENA_WHEEL_DIR=${ARENA_WHEEL_DIR:-$HOME/.cache/arena/wheels}
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$HOME/.cache/arena/debs}
missing=$(python3 - "$recipe" "$ARENA_WHEEL_DIR" <<'PY'
import os, sys, tomllib
r = tomllib.load(open(sys.argv[1], "rb"))
print(sum(1 for l in r["layer"] if l["kind"] == "wheels" for w in l["wheels"]
          if not os.path.exists(os.path.join(sys.argv[2], w["file"]))))
PY
)
if [ "$missing" != 0 ] && [ "${ARENA_FETCH:-0}" != 1 ]; then
  echo "cuda-pytorch: skipped: $missing pinned wheels are not in $ARENA_WHEEL_DIR (ARENA_FETCH=1 fetches the 4.2 GB set)"
  exit 0
fi
bash "$root/ci/fetch-wheels.sh" "$recipe" "$ARENA_WHEEL_DIR"
bash "$root/ci/fetch-debs.sh" "$recipe" "$ARENA_DEB_DIR"
cargo build --release --locked -q -p arenactl --manifest-path "$root/Cargo.toml"
arenactl=$root/target/release/arenactl
manifest() { python3 -c 'import json,sys; print(json.load(sys.stdin)["image"]["manifest"])'; }
declare -A digest
for s in a b; do
  rm -rf "$work/store-$s"
  t0=$(date +%s.%N)
  digest[$s]=$("$arenactl" image build "$recipe" --store "$work/store-$s" --json | manifest)
  echo "build into an empty store ($s): $(echo "$(date +%s.%N) - $t0" | bc) s, ${digest[$s]}"
done
[ "${digest[a]}" = "${digest[b]}" ] || { echo "cuda-pytorch: two empty stores gave two digests" >&2; exit 1; }
echo "store: $(du -sh "$work/store-a/blobs" | cut -f1) of blobs"
(cd "$root" && "$arenactl" lock --set cuda --out "$work/cuda.lock" --store "$work/store-a" >/dev/null)
# A fresh containerd: one kept from an earlier run holds the earlier digests under the same
# names, which `image load` rightly refuses.
bash "$root/ci/containerd.sh" stop "$work/ctd" 2>/dev/null || true
rm -rf "$work/ctd"
sock=$(bash "$root/ci/containerd.sh" start "$work/ctd")
trap 'bash "$root/ci/containerd.sh" stop "$work/ctd"' EXIT
image=$("$arenactl" image load --image-lock "$work/cuda.lock" --store "$work/store-a" \
  --containerd "$sock" --namespace arena --json |
  python3 -c 'import json,sys; print(next(i["name"] for i in json.load(sys.stdin)["images"] if (i["task"] or "").endswith("row_softmax")))')
ctr -a "$sock" -n arena run --rm "$image" cuda-pytorch-check python3 -c '
import time
t0 = time.perf_counter()
import sys, torch, triton
import numpy
import_s = time.perf_counter() - t0
print("torch", torch.__version__, "cuda build", torch.version.cuda, "triton", triton.__version__, "numpy", numpy.__version__)
assert torch.__version__.startswith("2.10.0") and torch.version.cuda and triton.__version__ == "3.6.0"
a = torch.arange(12.0).reshape(3, 4)
assert torch.equal(a @ torch.ones(4, 2), torch.tensor([[6.0, 6.0], [22.0, 22.0], [38.0, 38.0]]))
assert (a.numpy() @ numpy.ones((4, 2))).tolist() == [[6.0, 6.0], [22.0, 22.0], [38.0, 38.0]]
sys.path.insert(0, "/task/scripts")
import task_runner as t
for shape in t.TEST_SHAPES:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 4
    e = torch.exp(x.double() - x.double().max(dim=-1, keepdim=True).values)
    t.check(t.reference(x), (e / e.sum(dim=-1, keepdim=True)).float())
print("cpu op and row_softmax reference on", len(t.TEST_SHAPES), "shapes: ok")
import importlib.util
flags = open(importlib.util.cache_from_source(torch.__file__), "rb").read(8)[4:8]
assert flags == b"\x03\0\0\0", flags
print(f"import torch, triton, numpy: {import_s:.2f} s (checked-hash bytecode from the image)")
'
# arena's trusted harnesses for AgentKernelArena tasks, against the tasks' own kernels (run
# by Triton's interpreter on the CPU): each passes its untouched kernel and fails a wrong output.
ctr -a "$sock" -n arena run --rm --mount "type=bind,src=$root,dst=/repo,options=rbind:ro" \
  "$image" cuda-pytorch-aka-harnesses \
  python3 -B /repo/ci/aka-harness-check.py /repo/tasks/aka-harnesses /repo/ci/fixtures/aka-slice/tasks
# arena's harnesses derived from the 118 vLLM tasks' own runners (arena_task::derive), against
# the tasks' own kernels the same way: the untouched kernel passes, zeros and other inputs'
# outputs fail (ci/aka-derived-check.py; a task the interpreter cannot run says so).
rm -rf "$work/derived"
"$arenactl" task materialize --aka-root "$root/ci/fixtures/aka-slice" --out "$work/derived" \
  "$root/ci/fixtures/aka-vllm/tasks" >/dev/null
ctr -a "$sock" -n arena run --rm --mount "type=bind,src=$root,dst=/repo,options=rbind:ro" \
  --mount "type=bind,src=$work/derived,dst=/derived,options=rbind:rw" \
  "$image" cuda-pytorch-aka-derived \
  sh -c 'python3 -B /repo/ci/aka-derived-check.py --cases 1 --budget-s 120 /derived/triton2triton/vllm/*'
