#!/usr/bin/env bash
# A private containerd for arena: root, state and socket under DIR, stopped by its PID.
#   ci/containerd.sh start DIR   prints the socket path once the daemon answers
#   ci/containerd.sh stop DIR    stops it and releases every mount under DIR
set -euo pipefail
cmd=${1:?usage: ci/containerd.sh start|stop DIR}
dir=${2:?usage: ci/containerd.sh start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
case "$cmd" in
start)
  if [ -f "$dir/containerd.pid" ] && kill -0 "$(cat "$dir/containerd.pid")" 2>/dev/null; then
    echo "$dir/containerd.sock"; exit 0
  fi
  cat > "$dir/config.toml" <<TOML
version = 2
root = "$dir/root"
state = "$dir/state"
[grpc]
  address = "$dir/containerd.sock"
TOML
  containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 &
  pid=$!
  echo $pid > "$dir/containerd.pid"
  # The socket file exists from bind(), before the daemon listens or has loaded its plugins:
  # a client that connects then is refused (seen in CI on a loaded machine). Ready means a
  # request over gRPC is answered. 60 s: CI starts several daemons while it compiles.
  for _ in $(seq 600); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "containerd exited while starting; $dir/containerd.log ends:" >&2
      tail -n 20 "$dir/containerd.log" >&2; exit 1
    fi
    if [ -S "$dir/containerd.sock" ] &&
      ctr --address "$dir/containerd.sock" --timeout 2s version >/dev/null 2>&1; then
      echo "$dir/containerd.sock"; exit 0
    fi
    sleep 0.1
  done
  echo "containerd did not answer within 60 s; see $dir/containerd.log" >&2; exit 1 ;;
stop)
  if [ -f "$dir/containerd.pid" ]; then
    pid=$(cat "$dir/containerd.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/containerd.pid"
  fi
  # Shims outlive the daemon (one a killed client was starting a task through can be left
  # without a container): stop this daemon's, found by their -address under DIR.
  pkill -f -- "containerd-shim-runc-v2 .*-address $dir/" 2>/dev/null || true
  # Their snapshot mounts too: release every mount under DIR, deepest first, so DIR can be
  # removed.
  awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r |
    xargs -r -n1 umount -l 2>/dev/null || true ;;
*) echo "usage: ci/containerd.sh start|stop DIR" >&2; exit 2 ;;
esac
