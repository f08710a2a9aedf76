#!/usr/bin/env bash
# A lab's first real run on an offline NVIDIA machine, as README's "A lab's
# first run" has it: the Claude Code image on the host's captured userland (cuda-host-agents'
# claude-code-host), packed into an offline kit, installed and verified from inside a network
# namespace with no route, then `arenactl run` from the installed prefix of one
# AgentKernelArena task with agents/claude-code-host.toml as shipped. The model is
# arena-endpoint serving a scripted session from a test host of this script's own (a network
# namespace behind a veth pair, reached through the agent's egress network, as a lab's gateway
# is). The session reads the kernel, edits it with the CLI's Edit tool and runs the task's
# check on the GPU with its Bash tool; the run scores what it wrote, and the key is looked for
# in every byte the run left.
#
# The inputs arrive in parts (ci/gpu/lab-parts.sh; the device library carries 64 MiB a call),
# so the stages can run in consecutive calls on one warm machine, everything kept under WORK:
#   lab-first-run.sh gather PART…        add parts (checked against SHA256SUMS beside them)
#   lab-first-run.sh prep                host tools from their .debs, the cuda-host capture
#   lab-first-run.sh kit TASK_DIR        lock the one-agent set, pack, install with no route
#   lab-first-run.sh run OUT             containerd from the kit, the endpoint, the run, checks
# WORK is $ARENA_LAB_WORK (default /tmp/arena-lab). TASK_DIR is a materialized AKA task
# (`arenactl task materialize`); it goes into this checkout's tasks/ under triton2triton/vllm.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${ARENA_LAB_WORK:-/tmp/arena-lab}
stage=${1:?usage: lab-first-run.sh gather PART…|prep|kit TASK_DIR|run OUT}
shift
mkdir -p "$work/parts"
a=$work/lab/bin/arenactl
export ARENA_STORE=$work/store ARENA_HOST_ROOT=${ARENA_HOST_ROOT:-/}
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
cd "$root"

# Every part so far, joined and unpacked; with `whole`, a short stream is an error.
unpack() {
  (cd "$work/parts" && sha256sum --quiet -c --ignore-missing SHA256SUMS)
  if [ "${1:-}" = whole ]; then
    (cd "$work/parts" && sha256sum --quiet -c SHA256SUMS)
    cat "$work"/parts/part.* | xz -dc | tar -C "$work" -xf -
  else # the members the parts so far hold whole (the stream is sorted: bin, debs, tarballs)
    cat "$work"/parts/part.* | xz -dc 2>/dev/null | tar -C "$work" -xf - 2>/dev/null || true
  fi
}

set_name=cuda-host-claude
lock=lockfiles/$set_name.lock
task_id=triton2triton/vllm/triton_layernorm_gated

case "$stage" in
gather)
  for p in "$@"; do cp "$p" "$work/parts/"; done
  cp "$(dirname "$1")/SHA256SUMS" "$work/parts/"
  unpack
  ls -la "$work/parts"
  ;;
prep)
  test -x "$a" || { echo "no $a yet: gather the first part" >&2; exit 1; }
  python3 -c 'import torch, triton; print("host: torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))'
  # Hash-based .pyc files, as ci/gpu/arena-run.sh says why: the userland is the image.
  t=$(now)
  python3 -m compileall -q -f -j 0 --invalidation-mode unchecked-hash \
    /usr/lib/python3.12 /opt/torch/.venv/lib/python3.12/site-packages >/dev/null 2>&1 || true
  echo "TIME compileall $(since "$t")"
  t=$(now); $a image verify --image-lock lockfiles/host-tools.lock --deb-dir "$work/lab/debs"
  echo "TIME host-tools $(since "$t")"
  t=$(now); $a lock --set cuda-host --out "$work/cuda-host.lock"; echo "TIME lock-cuda-host $(since "$t")"
  ;;
kit)
  task=${1:?usage: lab-first-run.sh kit TASK_DIR}
  unpack whole
  rm -rf "tasks/$task_id"; mkdir -p "$(dirname "tasks/$task_id")"; cp -r "$task" "tasks/$task_id"
  # The shipped cuda-host-agents set less Codex: this machine takes one CLI's tarball.
  cat > images/lab-sets.toml <<TOML
[[set]]
name = "$set_name"
recipe = "cuda-host.toml"
tasks = "../tasks"
task_types = ["triton2triton"]
agents = ["claude-code-host.toml"]
TOML
  t=$(now)
  ARENA_TARBALL_DIR=$work/lab/tarballs $a lock --sets images/lab-sets.toml --set $set_name --out $lock
  echo "TIME lock $(since "$t")"
  t=$(now)
  $a offline pack --image-lock $lock --agent agents/claude-code-host.toml --deb-dir "$work/lab/debs" \
    --json -o "$work/kit.tar" >"$work/pack.json"
  echo "TIME pack $(since "$t")  $(du -h "$work/kit.tar" | cut -f1)"
  digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' "$work/pack.json")
  rm -rf "$work/install" "$work/opt"; mkdir -p "$work/install"
  t=$(now)
  # The offline node: a network namespace with no route anywhere, the kit's own arenactl.
  unshare -n bash -euxo pipefail -c "
    test -z \"\$(grep -v '^Iface' /proc/net/route || true)\"
    cd $work/install
    tar -xf ../kit.tar arena-offline/bin/arenactl
    arena-offline/bin/arenactl offline install ../kit.tar --prefix $work/opt/arena --expect $digest
    . $work/opt/arena/env.sh
    test \"\$(command -v containerd)\" = $work/opt/arena/bin/containerd
    nft --version
    arenactl offline verify --prefix $work/opt/arena"
  echo "TIME install+verify $(since "$t")  kit $digest"
  ;;
run)
  out=$(mkdir -p "${1:?usage: lab-first-run.sh run OUT}" && cd "$1" && pwd)
  # shellcheck disable=SC1091
  . "$work/opt/arena/env.sh"
  test "$(command -v arenactl)" = "$work/opt/arena/bin/arenactl"
  # The test host: a network namespace joined to this host by the kit's own CNI `ptp` plugin
  # (a veth pair, the host side its gateway), made without iproute2, which such a node may
  # lack. The agent's egress network routes to it as to any outside address.
  # Held by a sleeping process, not a mount: this node may refuse mounts.
  ns=
  conf='{"cniVersion":"1.0.0","name":"arena-lab","type":"ptp","ipMasq":false,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.199.77.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":"'$work'/cni-ipam"}}'
  cni() { CNI_COMMAND=$1 CNI_CONTAINERID=arena-lab CNI_NETNS=$ns CNI_IFNAME=eth0 CNI_PATH=$ARENA_CNI_PATH "$ARENA_CNI_PATH/ptp" <<<"$conf"; }
  cleanup() {
    [ -n "${ep:-}" ] && kill "$ep" 2>/dev/null
    bash "$root/ci/containerd.sh" stop "$work/ctd" || true
    [ -n "$ns" ] && cni DEL >/dev/null 2>&1
    [ -n "${holder:-}" ] && kill "$holder" 2>/dev/null
    true
  }
  trap cleanup EXIT
  (exec unshare -n sleep 100000) &
  holder=$!
  # Until it has left this namespace: before, its ns/net is the host's own.
  for _ in $(seq 100); do
    [ "$(readlink /proc/$holder/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
    sleep 0.05
  done
  [ "$(readlink /proc/$holder/ns/net)" != "$(readlink /proc/self/ns/net)" ] || { echo "unshare -n never took" >&2; exit 1; }
  ns=/proc/$holder/ns/net
  sock=$(bash ci/containerd.sh start "$work/ctd")
  host=$(cni ADD | python3 -c 'import json,sys; print(json.load(sys.stdin)["ips"][0]["address"].split("/")[0])')
  kernel=/workspace/source/triton_layernorm_gated.py
  check="cd /workspace && python3 scripts/task_runner.py correctness && echo checked-\$((40 + 2))"
  cat >"$work/session.toml" <<TOML
[[turn]]
tool = "Read"
input = { file_path = "$kernel" }
[[turn]]
tool = "Edit"
input = { file_path = "$kernel", old_string = "def layer_norm_fwd(", new_string = "# lab-first-run: edited by the CLI's own Edit tool\ndef layer_norm_fwd(" }
[[turn]]
tool = "Bash"
input = { command = "$check", description = "Check the kernel on the GPU" }
[[turn]]
text = "The kernel is annotated and the task's check passes."
TOML
  key="sk-ant-lab-canary-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  printf '%s\n' "$key" >"$work/anthropic.key"
  (exec "$work/lab/bin/arena-endpoint" --netns "$ns" --listen "$host:8088" \
    --script "$work/session.toml" --record "$out/requests.jsonl") 2>"$out/endpoint.log" &
  ep=$!
  rm -rf "$work/runs"
  t=$(now)
  (cd "$work/opt/arena/share" && ANTHROPIC_BASE_URL="http://$host:8088" \
    arenactl run --image-lock $lock --agent agents/claude-code-host.toml --gpus auto \
      --containerd "$sock" --tasks $task_id --secret "ANTHROPIC_API_KEY=$work/anthropic.key" \
      --trusted-pairs 3 --out "$work/runs/first") >"$out/run.stdout" 2>"$out/run.stderr" || echo "arenactl run: exit $?"
  echo "TIME run $(since "$t")"
  kill -TERM "$ep" 2>/dev/null || true; wait "$ep" || true; ep=
  arenactl report "$work/runs/first" --format json >"$out/report.json" || true
  cp "$work/runs/first/results.json" "$out/" 2>/dev/null || true
  tar -C "$work/runs" -czf "$out/run-dir.tgz" first
  python3 "$root/ci/gpu/lab-check.py" "$work/runs/first" "$out" "$key"
  ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
