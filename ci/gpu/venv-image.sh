#!/usr/bin/env bash
# On an offline NVIDIA GPU machine: build the `cuda-venv` image (images/cuda-venv.toml: the
# host's system trees plus PyTorch's virtualenv taken by its RECORDs, with build-time bytecode)
# twice into two empty stores and compare the digests, lock the AgentKernelArena triton2triton
# tasks on it, and run them through `arenactl run --image-lock` with an agent.
#
# usage: ci/gpu/venv-image.sh BIN_DIR OUT_DIR
#   BIN_DIR: a release `arenactl`, containerd-bundle.tar.xz and start-containerd.sh
#            (../shared/gpu/pack-containerd.sh and its partner script), and aka/: the AKA
#            tasks with their perf helpers put in (`arenactl task materialize --aka-root
#            ../shared/aka-slice --out BIN_DIR/aka ../shared/aka-slice/tasks`).
#   ARENA_GPU_TASKS: task ids to run (default: two vLLM tasks); `none` runs nothing.
#   ARENA_GPU_AGENT: the agent file (default ci/agents/noop.toml).
#   ARENA_GPU_TWICE=0: leave out the second build into an empty store.
#   ARENA_GPU_RUN_LIMIT: seconds after which the run is interrupted (what finished is kept);
#   ARENA_GPU_DEADLINE: the same, counted from the script's start.
#   ARENA_GPU_WORK: where stores and the run go (default /tmp/arena-venv; kept, so that a
#            second call on a machine still held reuses the first's store).
#   ARENA_GPU_KEEP=1: a later call on the same machine: reuse the running containerd, the
#            lockfile and the run directory (the same `arenactl run` resumes the run).
#   ARENA_GPU_ARGS: more `arenactl run` arguments (e.g. "--perf-pairs 5").
#   ARENA_GPU_RECIPE: the base recipe under images/ (default cuda-venv; cuda-host captures the
#            same userland as raw directories, and builds in a third of the time).
#   ARENA_GPU_TYPES: task types to lock, from BIN_DIR/aka/<type> (default: triton2triton alone,
#            with ids relative to aka/triton2triton); with it, ids start with the type
#            (triton2triton/vllm/triton_bincount).
#   ARENA_GPU_UNSEEN=1: before the run, `arenactl unseen generate --probe` over the locked
#            tasks (the original kernel on each candidate configuration in its image), and
#            the run evaluates both kernels on the probed set (ARENA_GPU_PER_TASK: 6;
#            ARENA_GPU_PROBE_ARGS: more of its arguments). A probe cut short goes on in the
#            next call (ARENA_GPU_KEEP=1); a sealed set is kept. Every call leaves the probe's
#            state and the sealed set in OUT_DIR/unseen-state.tgz, so that a probe can go on on
#            another machine after this one is given back: ARENA_GPU_UNSEEN_STATE=FILE (such a
#            tarball, carried in BIN_DIR) restores them before the probe (the lockfile must pin
#            the same images: cuda-host on a machine of the same userland does).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
tasks=${ARENA_GPU_TASKS:-vllm/triton_bincount vllm/triton_fla_l2norm}
agent=${ARENA_GPU_AGENT:-ci/agents/noop.toml}
twice=${ARENA_GPU_TWICE:-1}
keep=${ARENA_GPU_KEEP:-0}
recipe=${ARENA_GPU_RECIPE:-cuda-venv}
work=${ARENA_GPU_WORK:-/tmp/arena-venv}
arenactl=$bin/arenactl
export ARENA_HOST_ROOT=/
# Everything said also goes to OUT_DIR/log.txt, which comes back even from a call cut short.
exec > >(tee -a "$out/log.txt") 2>&1
(while sleep 30; do echo "-- $(date +%T)"; done) &
ticker=$!
trap 'kill $ticker 2>/dev/null || true' EXIT
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }
mkdir -p "$work"
cd "$root"

echo "== host"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader || true
venv=/opt/torch/.venv
cat "$venv/pyvenv.cfg"
ls -l "$venv/bin" | grep -i python || true
echo "distributions: $(ls -d "$venv"/lib/python3.12/site-packages/*.dist-info | wc -l)"
du -sh "$venv" 2>/dev/null || true

# containerd first: its start copies libseccomp into /usr/lib and runs ldconfig, which the
# captured system trees would otherwise see change between the lock and the run. Its state is
# new each time (an image of an earlier lock under the same name would be refused).
if [ "$tasks" != none ]; then
  echo "== containerd"
  ctd=$(cat "$work/containerd-current" 2>/dev/null || true)
  if [ "$keep" = 1 ] && [ -n "$ctd" ] && kill -0 "$(cat "$ctd/containerd.pid" 2>/dev/null)" 2>/dev/null; then
    sock=$ctd/containerd.sock
    echo "reusing $sock"
  else
    for p in "$work"/containerd*/containerd.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true; done
    # A directory of its own: a run interrupted earlier may leave a container's rootfs mounted.
    ctd=$work/containerd-$(date +%s)
    sock=$(bash "$bin/start-containerd.sh" "$bin/containerd-bundle.tar.xz" "$ctd")
    echo "$ctd" >"$work/containerd-current"
  fi
  # Left running: a later call (ARENA_GPU_KEEP=1) on this machine goes on with it.
fi

taskroot=$bin/aka/triton2triton
types_toml='"triton2triton"'
if [ -n "${ARENA_GPU_TYPES:-}" ]; then
  # One root of the chosen types only: what a probe generates from is what is locked.
  taskroot=$work/tasks
  if [ "$keep" != 1 ]; then
    rm -rf "$taskroot" && mkdir -p "$taskroot"
    for ty in $ARENA_GPU_TYPES; do cp -r "$bin/aka/$ty" "$taskroot/$ty"; done
  fi
  types_toml=$(printf '"%s", ' $ARENA_GPU_TYPES); types_toml=${types_toml%, }
fi
cat >"$work/sets.toml" <<TOML
[[set]]
name = "cuda-venv"
recipe = "$root/images/$recipe.toml"
tasks = "$taskroot"
task_types = [$types_toml]
TOML

if [ "$keep" = 1 ] && [ -f "$work/cuda-venv.lock" ]; then
  echo "== keeping the lockfile of an earlier call"
else
echo "== lock the AKA triton2triton tasks on cuda-venv (store a)"
t=$(now)
ARENA_STORE=$work/a $arenactl lock --sets "$work/sets.toml" --set cuda-venv --out "$work/cuda-venv.lock" 2>&1 | tail -15
echo "TIME lock $(since "$t")"
cp "$work/cuda-venv.lock" "$out/"
base=$(python3 -c 'import sys, tomllib; l = tomllib.load(open(sys.argv[1], "rb")); print(next(i["manifest"] for i in l["image"] if i["name"] == sys.argv[2]))' "$work/cuda-venv.lock" "$recipe")
echo "base $recipe: $base"
t=$(now)
ARENA_STORE=$work/a $arenactl lock --sets "$work/sets.toml" --set cuda-venv --out "$work/relock.lock" >/dev/null 2>&1
echo "TIME relock-unchanged $(since "$t")"
if cmp -s "$work/cuda-venv.lock" "$work/relock.lock"; then echo "relock: same lockfile"; else echo "RELOCK DIFFERS"; fi
t=$(now)
ARENA_STORE=$work/a $arenactl image verify --image-lock "$work/cuda-venv.lock" 2>&1 | tail -2
echo "TIME verify $(since "$t")"
du -sh "$work/a"
fi

if [ "$twice" = 1 ]; then
  echo "== the base again, into an empty store (b)"
  rm -rf "$work/b"
  t=$(now)
  again=$($arenactl image build images/cuda-venv.toml --store "$work/b" 2>/dev/null | awk '/cuda-venv/ {print $1}' | tail -1)
  echo "TIME build-b $(since "$t")"
  echo "base cuda-venv (store b): $again"
  [ "$again" = "$base" ] && echo "TWO STORES, ONE DIGEST" || echo "DIGESTS DIFFER"
  rm -rf "$work/b"
fi

[ "$tasks" = none ] && exit 0
unseen_args=()
if [ "${ARENA_GPU_UNSEEN:-0}" = 1 ]; then
  # Whatever happens below, what the probe did so far comes back with the call.
  trap 'kill $ticker 2>/dev/null || true; tar -C "$work" -czf "$out/unseen-state.tgz" --exclude="*/workspace/*" $(cd "$work" && ls -d .hidden.probe hidden 2>/dev/null) 2>/dev/null || true' EXIT
  if [ -n "${ARENA_GPU_UNSEEN_STATE:-}" ] && [ ! -e "$work/.hidden.probe" ] && [ ! -e "$work/hidden" ]; then
    echo "== restoring the probe's state from $ARENA_GPU_UNSEEN_STATE"
    tar -C "$work" -xzf "$ARENA_GPU_UNSEEN_STATE"
  fi
  if [ -f "$work/hidden/manifest.json" ]; then
    echo "== keeping the probed set of an earlier call"
  else
    echo "== unseen generate --probe over $taskroot"
    t=$(now)
    plimit=100000
    [ -n "${ARENA_GPU_DEADLINE:-}" ] && plimit=$((ARENA_GPU_DEADLINE - SECONDS))
    ARENA_STORE=$work/a timeout -s INT "$plimit" $arenactl unseen generate --tasks "$taskroot" --seed "${ARENA_GPU_SEED:-1}" \
      --per-task "${ARENA_GPU_PER_TASK:-6}" --out "$work/hidden" --probe "$work/cuda-venv.lock" \
      --gpus nvidia:0 --containerd "$sock" ${ARENA_GPU_PROBE_ARGS:-} || echo "PROBE rc=$?"
    echo "TIME probe $(since "$t")"
    if [ ! -f "$work/hidden/manifest.json" ]; then
      echo "the probe is not finished: call again with ARENA_GPU_KEEP=1 to go on"
      exit 0
    fi
  fi
  python3 - "$work/hidden" <<'PY' || true
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
p = m.get("probe") or {}
print("set", m["set_digest"], "rounds", p.get("rounds"))
for t in p.get("tasks", []):
    f = json.load(open(os.path.join(d, t["task_id"].replace("/", "__") + ".json")))
    cats = sorted({c["category"] for c in f["configs"]})
    print(f"  {t['task_id']}: {t['passed']}/{t['probed']} candidates passed; sealed {len(f['configs'])} ({len(cats)} categories)")
for s in m["skipped"]:
    print(f"  skipped {s['task_id']}: {s.get('kind')}: {s['reason'][:150]}")
PY
  unseen_args=(--unseen "$work/hidden")
fi
echo "== run ($agent)"
task_args=()
for task in $tasks; do task_args+=(--tasks "$task"); done
[ "$keep" = 1 ] || rm -rf "$work/run"
t=$(now)
rc=0
limit=${ARENA_GPU_RUN_LIMIT:-100000}
# ARENA_GPU_DEADLINE: seconds after this script's start by which the run stops (resumable).
[ -n "${ARENA_GPU_DEADLINE:-}" ] && limit=$((ARENA_GPU_DEADLINE - SECONDS))
echo "run limit ${limit} s"
# shellcheck disable=SC2086
ARENA_STORE=$work/a timeout -s INT "$limit" $arenactl run --image-lock "$work/cuda-venv.lock" --agent "$agent" --gpus nvidia:0 \
  --containerd "$sock" "${task_args[@]}" "${unseen_args[@]}" --out "$work/run" ${ARENA_GPU_ARGS:-} || rc=$?
echo "TIME run $(since "$t") rc=$rc"
cp "$work/run/results.json" "$out/" 2>/dev/null || true
tar -C "$work/run" -czf "$out/run-logs.tgz" --exclude='*/workspace/*' . 2>/dev/null || true
$arenactl report "$work/run" --format md 2>/dev/null | head -40 || true
python3 - "$out/results.json" <<'PY' || true
import json, statistics, sys
res = json.load(open(sys.argv[1]))
print("| task | trust | gates | paired speedup (median ratio per case, mean) | cases | pairs | arena share | device warnings |")
print("|---|---|---|---:|---:|---:|---:|---|")
for t in res["tasks"]:
    cand = t.get("candidate") or {}
    def gates(e):
        e = e or {}
        return "/".join(((e.get(g) or {}).get("status") or "-") for g in ("compile", "correctness"))
    cases = cand.get("performance") or []
    ratios = []
    for c in cases:
        p = c.get("pairs_ms")
        if p:
            ratios.append(statistics.median(b / x for b, x in p))
    sp = f"{statistics.fmean(ratios):.4f}" if ratios and len(ratios) == len(cases) else "n/a"
    b = (t.get("timings") or {}).get("breakdown") or {}
    warn = "; ".join(w for d in (t.get("device") or {}).values() for w in d.get("warnings", []))
    npairs = len(cases[0].get("pairs_ms") or []) if cases else 0
    share = f"{100 * b['arena_share']:.1f}%" if b else "-"
    print(f"| {t['task_id']} | {t.get('trust')} | {gates(t.get('baseline'))} {gates(cand)} | {sp} | {len(cases)} | {npairs} | {share} | {warn[:120]} |")
    for c in cases:
        p = c.get("pairs_ms") or []
        print(f"    {c['test_case_id']}: {c.get('baseline_ms')} / {c['execution_time_ms']} ms, pairs {[(round(x, 5), round(y, 5)) for x, y in p]}")
    for k in ("candidate_refused",):
        if t.get(k):
            print("    ", k, str(t[k])[:300])
    if cand.get("performance_error"):
        print("     performance_error", cand["performance_error"][:300])
    if t.get("cross_check"):
        print("     cross-check", t["cross_check"].get("verdict"), t["cross_check"].get("reason", "")[:200])
    print("     breakdown", json.dumps(b))
    print("     floor", cand.get("device_floor_ms"), "source", cand.get("performance_source"))
    tuned = cand.get("autotuning")
    if tuned:
        print("     autotuning varied:", tuned.get("varied") or "no")
        for step, chosen in sorted(tuned.get("runs", {}).items()):
            print(f"       {step}: " + "; ".join(c["config"] for c in chosen))
    u = t.get("unseen")
    if u:
        op, ap = u.get("original_passed", []), u.get("optimized_passed", [])
        print(f"     unseen: original passes {sum(op)}/{len(op)}, agent's {sum(ap)}/{len(ap)}; "
              f"original {((u['original'].get('correctness') or {}).get('status'))}, cases {len(u['original'].get('performance') or [])}")
PY
