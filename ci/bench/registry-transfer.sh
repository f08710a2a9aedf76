#!/usr/bin/env bash
# Benchmark: push and pull one image (a layer of ~MB MB sampled from /usr/lib, plus a small one)
# through a local registry (Debian's docker-registry on 127.0.0.1), side by side with skopeo
# doing the same copies (oci layout <-> docker://), each into an empty destination. Prints each
# time and arena's ratio to skopeo. Both verify digests; arena also writes each blob through a
# staging file and renames it (the store's crash safety).
# usage: ci/bench/registry-transfer.sh [WORK_DIR] [MB]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d)}
mb=${2:-300}
cargo build --release --locked -q -p arenactl --manifest-path "$root/Cargo.toml"
arenactl=$root/target/release/arenactl
command -v docker-registry >/dev/null || { echo "docker-registry missing: bash ci/setup.sh" >&2; exit 1; }
command -v skopeo >/dev/null || { echo "skopeo missing: bash ci/setup.sh" >&2; exit 1; }
tree=$work/tree
if [ ! -d "$tree" ]; then
  mkdir -p "$tree"
  python3 - "$tree" "$mb" <<'PY'
import os, shutil, sys
dst, limit = sys.argv[1], int(sys.argv[2]) << 20
files = []
for d, dirs, names in os.walk("/usr/lib"):
    dirs.sort()
    for f in sorted(names):
        p = os.path.join(d, f)
        if not os.path.islink(p) and os.path.isfile(p):
            files.append((p, os.path.getsize(p)))
total = sum(s for _, s in files)
share, acc = min(1.0, limit / total), 0.0
for p, size in files:
    acc += size * share
    if acc >= size:
        acc -= size
        out = os.path.join(dst, os.path.relpath(p, "/usr/lib"))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.copy2(p, out)
PY
fi
cat > "$work/bench.toml" <<EOT
name = "regbench"
[base]
kind = "scratch"
[[layer]]
kind = "directory"
path = "tree"
target = "/usr/lib"
EOT
# The built store is kept between runs (an unchanged recipe is not rebuilt); the destinations
# are emptied.
rm -rf "$work/pulled" "$work/skopeo-pulled" "$work/registry"
"$arenactl" image build --store "$work/store" "$work/bench.toml" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
host=127.0.0.1:$port
cat > "$work/registry.yml" <<EOT
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: $host
EOT
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
reg=$!
trap 'kill $reg 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
size=$(du -sm "$work/store/blobs" | cut -f1)
echo "image: ${size} MB of blobs in the store; registry $host; $(nproc) cores"
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
push_arena=$(t env DOCKER_CONFIG="$work/none" "$arenactl" image push --store "$work/store" regbench "$host/arena/regbench:v1")
push_skopeo=$(t skopeo copy --dest-tls-verify=false "oci:$work/store:regbench" "docker://$host/skopeo/regbench:v1")
pull_arena=$(t env DOCKER_CONFIG="$work/none" "$arenactl" image pull --store "$work/pulled" "$host/arena/regbench:v1")
pull_skopeo=$(t skopeo copy --src-tls-verify=false "docker://$host/skopeo/regbench:v1" "oci:$work/skopeo-pulled:regbench")
printf '%-6s %10s %10s %8s\n' op arena_s skopeo_s ratio
printf '%-6s %10.2f %10.2f %8.2f\n' push "$push_arena" "$push_skopeo" "$(echo "$push_arena / $push_skopeo" | bc -l)"
printf '%-6s %10.2f %10.2f %8.2f\n' pull "$pull_arena" "$pull_skopeo" "$(echo "$pull_arena / $pull_skopeo" | bc -l)"
