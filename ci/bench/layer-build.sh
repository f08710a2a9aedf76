#!/usr/bin/env bash
# Benchmark: build one layer from the same ~700 MB directory tree (a copy of part of /usr/lib),
# side by side: arena (zstd and gzip), `umoci insert` (gzip), and `tar | sha256sum` as the
# hashing floor; then arena's no-change rebuild. Prints each round's times and the median ratios.
# usage: ci/bench/layer-build.sh [WORK_DIR] [MB] [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d)}
mb=${2:-700}
rounds=${3:-5}
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
# Rounds alternate the contenders, so the shared machine's drift reaches all of them alike;
# the floor runs before and after arena's builds and each round's ratio uses their mean.
printf '%-6s %8s %8s %8s %8s %8s\n' round floor zstd gzip umoci floor2
rows=$work/rounds.txt; : > "$rows"
for i in $(seq "$rounds"); do
  floor=$(t sh -c "tar -cf - -C '$tree' . | sha256sum")
  rm -rf "$work/s1" "$work/s2"
  arena_zstd=$(t "$arenactl" image build "$work/zstd.toml" --store "$work/s1")
  arena_gzip=$(t "$arenactl" image build "$work/gzip.toml" --store "$work/s2")
  rm -rf "$work/oci"
  umoci init --layout "$work/oci" && umoci new --image "$work/oci:t"
  umoci_t=$(t umoci insert --rootless --image "$work/oci:t" "$tree" /)
  floor2=$(t sh -c "tar -cf - -C '$tree' . | sha256sum")
  printf '%-6s %8.2f %8.2f %8.2f %8.2f %8.2f\n' "$i" "$floor" "$arena_zstd" "$arena_gzip" "$umoci_t" "$floor2"
  echo "$floor $arena_zstd $arena_gzip $umoci_t $floor2" >> "$rows"
done
# The no-change rebuild, three times (the median is printed): one alone reads 0.4-0.8 s here.
noops=$(for _ in 1 2 3; do t "$arenactl" image build "$work/zstd.toml" --store "$work/s1"; done)
noop=$(echo "$noops" | sort -n | sed -n 2p)
size() { find "$1" -type f -size +1M -printf '%s\n' | sort -n | tail -1; }
python3 - "$rows" "$noop" "$(size "$work/s2/blobs")" "$(size "$work/oci/blobs")" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
zf = [r[1] / ((r[0] + r[4]) / 2) for r in rows]
uz = [r[3] / r[1] for r in rows]
ug = [r[3] / r[2] for r in rows]
show = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
print(f"\nmedians over {len(rows)} rounds (each round's ratios: in brackets)")
print(f"arena-zstd / floor:  {med(zf):.2f}x [{show(zf)}]   (target <= 1.3)")
print(f"umoci / arena-zstd:  {med(uz):.2f}x [{show(uz)}]   (target >= 1.6)")
print(f"umoci / arena-gzip:  {med(ug):.2f}x [{show(ug)}]   (target >= 2)")
g, u = int(sys.argv[3]), int(sys.argv[4])
print(f"gzip layer: arena {g:,} bytes, umoci {u:,} bytes (arena / umoci {g / u:.3f})")
print(f"no-change rebuild:   {float(sys.argv[2]):.2f} s   (target < 0.5)")
PY
