#!/usr/bin/env bash
# Here, on a connected machine: what ci/gpu/lab-first-run.sh needs on an offline GPU machine
# that takes at most ~47 MB per call (the device library's 64 MiB a call, less the checkout),
# as numbered parts of one stream: the release arenactl and arena-endpoint, the host tools'
# pinned .debs (images/host-tools.toml) and Claude Code's pinned tarball
# (images/claude-code-host.toml). On the GPU machine, `lab-first-run.sh gather` joins them.
# usage: ci/gpu/lab-parts.sh OUT_DIR [PART_BYTES]     (OUT_DIR/part.00, part.01, …, SHA256SUMS)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: ci/gpu/lab-parts.sh OUT_DIR [PART_BYTES]}
size=${2:-47000000}
debs=${ARENA_DEB_DIR:-$HOME/.cache/arena/debs}
tarballs=${ARENA_TARBALL_DIR:-$HOME/.cache/arena/tarballs}
cd "$root"
cargo build --release --locked -p arenactl -p arena-endpoint
bash ci/fetch-debs.sh images/host-tools.toml "$debs" >/dev/null
bash ci/fetch-tarballs.sh images/claude-code-host.toml "$tarballs" >/dev/null
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lab/bin" "$tmp/lab/debs" "$tmp/lab/tarballs"
for b in arenactl arena-endpoint; do strip -o "$tmp/lab/bin/$b" "target/release/$b"; done
# The .debs host-tools.toml pins, by the names fetch-debs.sh gives them; arenactl checks each
# one's sha256 when it builds the image there.
python3 - "$debs" "$tmp/lab/debs" <<'PY'
import shutil, sys, tomllib
src, dst = sys.argv[1:]
for layer in tomllib.load(open("images/host-tools.toml", "rb"))["layer"]:
    for p in layer.get("packages", []):
        shutil.copy(f"{src}/{p['name']}_{p['version'].replace(':', '%3a')}_{p['arch']}.deb", dst)
PY
# The tarball the recipe pins, by the file name its layer names.
tgz=$(python3 -c 'import os, tomllib; print(next(os.path.basename(l["path"]) for l in tomllib.load(open("images/claude-code-host.toml", "rb"))["layer"] if l.get("kind") == "tarball"))')
cp "$tarballs/$tgz" "$tmp/lab/tarballs/"
rm -rf "$out"; mkdir -p "$out"
tar -C "$tmp" --sort=name -cf - lab | xz -T0 -1 | split -b "$size" -d -a 2 - "$out/part."
(cd "$out" && sha256sum part.* > SHA256SUMS)
ls -la "$out"
