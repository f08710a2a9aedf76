#!/usr/bin/env bash
# The task folders of the benchmark sets, made from a checkout of their source at the commit
# the committed lockfile pins, and checked against it:
#   aka          AgentKernelArena's 196 Triton tasks (set aka-cuda, ../aka-tasks),
#                `arenactl task materialize` with arena's harnesses, from AKA commit d6f7c8a4
#   kernelbench  KernelBench's levels 1-3 (set kernelbench-cuda, ../kb-tasks),
#                `arenactl task import kernelbench`, from KernelBench commit 423217d
# By default every task's digest is compared with the lockfile (no image is built). With
# --images, `arenactl image verify` rebuilds every image (the CUDA base needs its 4.2 GB of
# pinned wheels: bash ci/fetch-wheels.sh images/cuda-pytorch.toml "$ARENA_WHEEL_DIR"); with
# --relock, `arenactl lock` writes the lockfile anew (after a change to arena's harnesses or
# to what materialize or import write).
# usage: ci/lock-benchmarks.sh aka|kernelbench CHECKOUT [--images|--relock]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
which=${1:?usage: ci/lock-benchmarks.sh aka|kernelbench CHECKOUT [--images|--relock]}
src=${2:?usage: ci/lock-benchmarks.sh aka|kernelbench CHECKOUT [--images|--relock]}
mode=${3:-}
arenactl=${ARENACTL:-arenactl}
case "$which" in
  aka) set=aka-cuda; out=$root/aka-tasks; commit=d6f7c8a4 ;;
  kernelbench) set=kernelbench-cuda; out=$root/kb-tasks; commit=423217d ;;
  *) echo "usage: ci/lock-benchmarks.sh aka|kernelbench CHECKOUT [--images|--relock]" >&2; exit 2 ;;
esac
if git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
  head=$(git -C "$src" rev-parse HEAD)
  case "$head" in
    "$commit"*) ;;
    *) echo "$src is at $head; lockfiles/$set.lock was made from $commit (check it out first)" >&2; exit 1 ;;
  esac
else
  echo "warning: $src is not a git checkout: its commit cannot be checked against $commit" >&2
fi
tmp=$(mktemp -d "$root/.lock-benchmarks-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
case "$which" in
  aka)
    # An AKA root of the Triton families only (the rest of AKA's tasks are AMD's: HIP,
    # FlyDSL), so that ids read as in AKA's tree: triton2triton/vllm/…
    mkdir -p "$tmp/src/tasks"
    cp -r "$src/src" "$tmp/src/"
    for t in triton2triton instruction2triton; do cp -r "$src/tasks/$t" "$tmp/src/tasks/"; done
    "$arenactl" task materialize --aka-root "$tmp/src" --out "$tmp/tasks" \
      --harnesses "$root/tasks/aka-harnesses" "$tmp/src/tasks" >/dev/null ;;
  kernelbench)
    mkdir -p "$tmp/src/KernelBench"
    for l in level1 level2 level3; do cp -r "$src/KernelBench/$l" "$tmp/src/KernelBench/"; done
    "$arenactl" task import kernelbench "$tmp/src" --out "$tmp/tasks" >/dev/null ;;
esac
rm -rf "$out" && mv "$tmp/tasks" "$out"
echo "$out: $(find "$out" -name config.yaml | wc -l) tasks"
lock=$root/lockfiles/$set.lock
case "$mode" in
  --relock) "$arenactl" lock --set "$set" --sets "$root/images/sets.toml" --out "$lock" ;;
  --images) "$arenactl" image verify --image-lock "$lock" ;;
  "")
    "$arenactl" task digest "$out" --json | python3 -c '
import json, sys, tomllib
lock = tomllib.load(open(sys.argv[1], "rb"))
pinned = {i["task"]: i["task_digest"] for i in lock["image"] if i.get("task")}
found = {t["id"]: t["digest"] for t in json.load(sys.stdin)}
bad = sorted(k for k in pinned.keys() | found.keys() if pinned.get(k) != found.get(k))
for k in bad:
    a, b = pinned.get(k, "(absent)"), found.get(k, "(absent)")
    print(f"{k}: locked {a}, found {b}")
print(f"{len(found) - len(bad)} of {len(pinned)} locked tasks match {sys.argv[1]}")
sys.exit(1 if bad else 0)' "$lock" ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
