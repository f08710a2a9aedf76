"""What ci/gpu/lab-first-run.sh's run must show, checked and written as OUT/lab-summary.json.

usage: lab-check.py RUN_DIR OUT KEY

- The CLI's session: at least four model requests (read, edit, check, answer), each carrying
  the run's key, and the last one holding the output of the task's check as the CLI's Bash tool
  ran it on the GPU (`checked-42`, printed only when the check passed).
- The run: one task result, compiled and correct, scored from the CLI's own edit (the marker its
  Edit tool wrote is in the candidate kept), with the agent image's digest in its provenance.
- The key: in no byte of the run directory, nor in what `arenactl run` printed.
Exits 1 naming each check that failed.
"""
import json
import os
import sys

run, out, key = sys.argv[1:]
checks = {}


def check(name, ok, seen):
    checks[name] = {"ok": bool(ok), "seen": seen}


reqs = [json.loads(l) for l in open(os.path.join(out, "requests.jsonl"))] if os.path.exists(
    os.path.join(out, "requests.jsonl")) else []
turns = [r for r in reqs if r["path"] == "/v1/messages"]
check("four or more model turns", len(turns) >= 4, f"{len(turns)} of {len(reqs)} requests")
check("every request carried the run's key", reqs and all(r.get("api_key") == key for r in reqs),
      sorted({str(r.get("api_key") == key) for r in reqs}))
last = json.dumps(turns[-1]["body"]) if turns else ""
check("the check ran and passed inside the agent's container", "checked-42" in last,
      last[-600:])

try:
    results = json.load(open(os.path.join(run, "results.json")))["tasks"]
    report = json.load(open(os.path.join(out, "report.json")))["tasks"]
except (OSError, ValueError, KeyError) as e:
    results, report = [], []
    check("results and report", False, str(e))
check("one task result", len(results) == 1, len(results))
if results:
    r, s = results[0], report[0] if report else {}
    check("compiled and correct", s.get("compiled") and s.get("correct"),
          {k: s.get(k) for k in ("compiled", "correct", "speedup", "score", "trust")})
    image = (r.get("provenance") or {}).get("agent_image") or ""
    check("agent image digest in provenance", image.startswith("sha256:"), image)
marked = []
for d, _, files in os.walk(run):
    for f in files:
        if f == "triton_layernorm_gated.py":
            p = os.path.join(d, f)
            if b"lab-first-run: edited by the CLI's own Edit tool" in open(p, "rb").read():
                marked.append(os.path.relpath(p, run))
check("the CLI's edit is what was scored", marked, marked)

leaks = []
for d, _, files in os.walk(run):
    for f in files:
        p = os.path.join(d, f)
        if os.path.isfile(p) and not os.path.islink(p) and key.encode() in open(p, "rb").read():
            leaks.append(os.path.relpath(p, run))
for f in ("run.stdout", "run.stderr"):
    p = os.path.join(out, f)
    if os.path.exists(p) and key.encode() in open(p, "rb").read():
        leaks.append(f)
check("the key is in no byte the run left", not leaks, leaks)

summary = {"checks": checks, "passed": all(c["ok"] for c in checks.values())}
json.dump(summary, open(os.path.join(out, "lab-summary.json"), "w"), indent=1, default=str)
for name, c in checks.items():
    print(f"{'ok  ' if c['ok'] else 'FAIL'} {name}: {str(c['seen'])[:300]}")
sys.exit(0 if summary["passed"] else 1)
