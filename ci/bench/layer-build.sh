#!/usr/bin/env bash
# Benchmark: build one layer from the same ~700 MB directory tree (a copy of part of /usr/lib),
# side by side: arena (zstd and gzip), `umoci insert` (gzip), and `tar | sha256sum` as the
# hashing floor; then arena's no-change rebuild. Prints each time and the ratios.
# usage: ci/bench/layer-build.sh [WORK_DIR] [MB]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d)}
mb=${2:-700}
cargo build --release --locked -q -p arenactl --manifest-path "$root/Cargo.toml"
arenactl=$root/target/release/arenactl
tree=$work/tree
if [ ! -d "$tree" ]; then
  # Files of /usr/lib sampled evenly by bytes up to the size: a realistic mix of many small
  # and some large files, the same selection on every run of the same machine.
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
size_mb=$(du -sm "$tree" | cut -f1); files=$(find "$tree" | wc -l)
echo "tree: $tree, ${size_mb} MB, $files entries; $(nproc) cores"
for c in zstd gzip; do
  printf 'name = "bench-%s"\ncompression = "%s"\n[base]\nkind = "scratch"\n[[layer]]\nkind = "directory"\npath = "%s"\n' "$c" "$c" "$tree" > "$work/$c.toml"
done
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
cat "$(find "$tree" -type f | head -2000)" >/dev/null 2>&1 || true
tar -cf - -C "$tree" . | sha256sum >/dev/null          # warm the page cache for everyone
floor=$(t sh -c "tar -cf - -C '$tree' . | sha256sum")
rm -rf "$work/s1" "$work/s2"
arena_zstd=$(t "$arenactl" image build "$work/zstd.toml" --store "$work/s1")
arena_gzip=$(t "$arenactl" image build "$work/gzip.toml" --store "$work/s2")
noop=$(t "$arenactl" image build "$work/zstd.toml" --store "$work/s1")
rm -rf "$work/oci"
umoci init --layout "$work/oci" && umoci new --image "$work/oci:t"
umoci_t=$(t umoci insert --rootless --image "$work/oci:t" "$tree" /)
printf '\n%-34s %8s\n' "what" "seconds"
printf '%-34s %8.2f\n' "tar | sha256sum (floor)" "$floor" "arena, zstd (default)" "$arena_zstd" \
  "arena, gzip" "$arena_gzip" "umoci insert (gzip)" "$umoci_t" "arena no-change rebuild" "$noop"
echo
echo "umoci / arena-zstd:  $(echo "scale=2; $umoci_t / $arena_zstd" | bc)x   (target >= 1.6)"
echo "umoci / arena-gzip:  $(echo "scale=2; $umoci_t / $arena_gzip" | bc)x"
echo "arena-zstd / floor:  $(echo "scale=2; $arena_zstd / $floor" | bc)x   (target <= 1.3)"
echo "no-change rebuild:   ${noop} s   (target < 0.5)"
