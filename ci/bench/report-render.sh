#!/usr/bin/env bash
# Benchmark: the HTML report of a 400-task run (a synthetic run, arena_report::fixture), side by
# side with its peers: `arenactl report` against reading the same results.json with Python's
# json module (the floor of looking at the file at all), and chromium rendering the page
# (--dump-dom, after its script ran) against chromium rendering an empty page. Prints each time,
# the ratios and the page's size (the issue's bounds: under 2 s, under 5 MB).
# usage: ci/bench/report-render.sh [TASKS] [REPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tasks=${1:-400}
reps=${2:-5}
work=$(mktemp -d /tmp/arena-report-bench-XXXX)
trap 'rm -rf "$work"' EXIT
cd "$root"
cargo build --release --locked -q -p arenactl
cargo run --release --locked -q -p arena-report --example fixture_run -- "$work/run" "$tasks" 1 1.0 1
arenactl=$root/target/release/arenactl
echo '<!DOCTYPE html><html><body></body></html>' >"$work/empty.html"
best() { # COMMAND...: the best of $reps wall times, in seconds
  python3 - "$reps" "$@" <<'PY'
import subprocess, sys, time
reps, cmd = int(sys.argv[1]), sys.argv[2:]
ts = []
for _ in range(reps):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ts.append(time.perf_counter() - t)
print(f"{min(ts):.3f}")
PY
}
chrome=(chromium --headless --no-sandbox --disable-gpu "--user-data-dir=$work/profile" --dump-dom)
t_report=$(best "$arenactl" report "$work/run")
t_json=$(best python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/run/results.json")
t_page=$(best "${chrome[@]}" "file://$work/run/report.html")
t_empty=$(best "${chrome[@]}" "file://$work/empty.html")
size=$(stat -c %s "$work/run/report.html")
python3 - "$tasks" "$t_report" "$t_json" "$t_page" "$t_empty" "$size" <<'PY'
import sys
n, rep, js, page, empty, size = sys.argv[1], *map(float, sys.argv[2:6]), int(sys.argv[6])
print(f"{n} task runs, best of the repeats:")
print(f"  arenactl report (html)       {rep:7.3f} s   vs python json.load of results.json {js:.3f} s: {rep / js:.2f}x")
print(f"  chromium renders the page    {page:7.3f} s   vs an empty page {empty:.3f} s: {page / empty:.2f}x (+{page - empty:.3f} s)")
print(f"  page size                    {size / 1e6:7.2f} MB")
PY
