#!/usr/bin/env bash
# Benchmark: is an unchanged re-lock, and a verify, O(1) per task? Locks N copies of
# a CPU sample task on the testbase for each N, then re-locks them unchanged and verifies the
# lockfile, side by side with the floor of any check that reads every task: hashing the task
# trees with `sha256sum`. Prints seconds and milliseconds per task for each N; constant
# milliseconds per task as N grows is O(1) per task.
# usage: ci/bench/relock.sh [WORK_DIR] [COUNTS]   (COUNTS default "8 32 128"; ARENACTL=path
#        skips the release build; ARENA_DEB_DIR as for the tests)
# On a GPU host (ci/gpu/relock.sh): ARENA_BENCH_RECIPE=images/cuda-host.toml with
# ARENA_HOST_ROOT=/, ARENA_BENCH_TASKS=DIR (the first N task folders directly below DIR instead
# of N copies of matmul) and ARENA_BENCH_TYPE=triton2triton.
# ARENA_BENCH_CONTAINERD=SOCKET also loads each lockfile into that containerd (`arenactl image
# load`, a namespace per N): the first load, then the same load on a node that has it, beside
# the floor of asking containerd about every image (`ctr images ls`).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d)}
counts=${2:-8 32 128}
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$HOME/.cache/arena/debs}
recipe=${ARENA_BENCH_RECIPE:-$root/images/testbase.toml}
recipe=$(cd "$(dirname "$recipe")" && pwd)/$(basename "$recipe")
kind=${ARENA_BENCH_TYPE:-python2python}
from=${ARENA_BENCH_TASKS:-}
[ -n "${ARENA_HOST_ROOT:-}" ] || bash "$root/ci/fetch-debs.sh" "$recipe" "$ARENA_DEB_DIR"
if [ -z "${ARENACTL:-}" ]; then
  cargo build --release --locked -q -p arenactl --manifest-path "$root/Cargo.toml"
  ARENACTL=$root/target/release/arenactl
fi
store=$work/store
secs() { python3 -c 'import sys,time; t=time.monotonic(); import subprocess; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(f"{time.monotonic()-t:.3f}")' "$@"; }
echo "arenactl: $ARENACTL; $(nproc) cores; store $store"
sock=${ARENA_BENCH_CONTAINERD:-}
printf '%6s %10s %10s %10s %10s | %10s %10s %10s' tasks lock_s relock_s verify_s sha256_s \
  "lock/task" "relock/t" "verify/t"
[ -z "$sock" ] || printf ' | %10s %10s %10s %10s' load_s reload_s ctr_ls_s "reload/t"
echo
for n in $counts; do
  d=$work/n$n
  rm -rf "$d"; mkdir -p "$d/tasks/copies"
  if [ -n "$from" ]; then
    found=$(find "$from" -mindepth 2 -maxdepth 2 -name config.yaml | sort | head -n "$n" | xargs -n1 dirname)
    [ "$(echo "$found" | wc -l)" -eq "$n" ] || { echo "fewer than $n tasks in $from" >&2; exit 1; }
    for t in $found; do cp -r "$t" "$d/tasks/copies/"; done
  else
    for i in $(seq -w 1 "$n"); do
      cp -r "$root/tasks/python2python/arena/matmul" "$d/tasks/copies/t$i"
    done
  fi
  printf '[[set]]\nname = "bench"\nrecipe = "%s"\ntasks = "tasks"\ntask_types = ["%s"]\n' \
    "$recipe" "$kind" > "$d/sets.toml"
  lock=(lock --set bench --sets "$d/sets.toml" --out "$d/bench.lock" --store "$store")
  # The base once, outside the timings: every N builds on the same store.
  "$ARENACTL" image build "$recipe" --store "$store" >/dev/null 2>&1
  first=$(secs "$ARENACTL" "${lock[@]}")
  cp "$d/bench.lock" "$d/first.lock"
  again=$(secs "$ARENACTL" "${lock[@]}")
  cmp -s "$d/bench.lock" "$d/first.lock" || { echo "relock changed the lockfile" >&2; exit 1; }
  verify=$(secs "$ARENACTL" image verify --image-lock "$d/bench.lock" --store "$store")
  floor=$(secs sh -c "find '$d/tasks' -type f -print0 | sort -z | xargs -0 cat | sha256sum")
  loads=()
  if [ -n "$sock" ]; then
    load=(image load --image-lock "$d/bench.lock" --store "$store" --containerd "$sock"
          --namespace "arena-bench-$n")
    loads=("$(secs "$ARENACTL" "${load[@]}")" "$(secs "$ARENACTL" "${load[@]}")"
           "$(secs ctr -a "$sock" -n "arena-bench-$n" images ls -q)")
  fi
  python3 - "$n" "$first" "$again" "$verify" "$floor" "${loads[@]}" <<'PY'
import sys
n, *t = sys.argv[1:]
n = int(n); first, again, verify, floor = map(float, t[:4])
line = (f"{n:6d} {first:10.3f} {again:10.3f} {verify:10.3f} {floor:10.3f} | "
        f"{1000*first/n:10.1f} {1000*again/n:10.1f} {1000*verify/n:10.1f}")
if len(t) > 4:
    load, reload, ls = map(float, t[4:])
    line += f" | {load:10.3f} {reload:10.3f} {ls:10.3f} {1000*reload/n:10.1f}"
print(line)
PY
done
