#!/usr/bin/env python3
"""The tables of ci/gpu/derived-run.sh: per task, the noop run's speedup and interval (from
`arenactl report --format json`: does it hold 1?), what the sync_noop run's candidate got, and
what the unseen run's hidden configurations gave each kernel, with the trust and harness the
evaluator ran. Reads OUT/{noop,sync_noop,unseen}[-gG]-{results,report}.json, whichever exist.

usage: ci/gpu/derived-summary.py OUT_DIR
"""
import glob
import json
import os
import sys


def load(out, name):
    """OUT/RUN-KIND.json, or the parts of a run shared out over GPUs (OUT/RUN-gG-KIND.json)
    with their task lists joined."""
    run, kind = name.rsplit("-", 1)
    paths = [os.path.join(out, name)] + sorted(glob.glob(os.path.join(out, f"{run}-g*-{kind}")))
    merged = None
    for p in paths:
        try:
            with open(p) as f:
                part = json.load(f)
        except (OSError, ValueError):
            continue
        if merged is None:
            merged = part
        else:
            merged["tasks"] = merged.get("tasks", []) + part.get("tasks", [])
    return merged


def gates(e):
    e = e or {}
    return "/".join(((e.get(g) or {}).get("status") or "-") for g in ("compile", "correctness"))


def why(e):
    e = e or {}
    for g in ("compile", "correctness"):
        err = (e.get(g) or {}).get("error")
        if err:
            return f"{g}: {err}"
    return e.get("performance_error") or ""


def scores(report):
    return {t["task_id"]: t for t in (report or {}).get("tasks", [])}


def trust(t):
    r = t.get("trust_reason")
    return t.get("trust", "?") + (f" ({r[:100]})" if r else "")


def main(out):
    noop, sync, unseen = (load(out, f"{n}-results.json") for n in ("noop", "sync_noop", "unseen"))
    noop_s, sync_s = (scores(load(out, f"{n}-report.json")) for n in ("noop", "sync_noop"))
    if noop:
        print("\n## noop (the untouched kernel)\n")
        print("| task | trust | gates (baseline, candidate) | speedup | interval | holds 1 | task run (s) |")
        print("|---|---|---|---:|---|---|---:|")
        held = 0
        for t in noop["tasks"]:
            s = noop_s.get(t["task_id"], {})
            lo, hi = s.get("speedup_interval") or (None, None)
            holds = lo is not None and lo <= 1.0 <= hi
            held += holds
            iv = f"{lo:.3f}–{hi:.3f}" if lo is not None else "-"
            total = (t.get("timings") or {}).get("total_s")
            print(f"| {t['task_id']} | {trust(t)} | {gates(t['baseline'])}, {gates(t['candidate'])} | "
                  f"{s.get('speedup', 0):.4f} | {iv} | {'yes' if holds else 'NO'} | {total or 0:.0f} |")
        print(f"\nintervals holding 1: {held} of {len(noop['tasks'])}")
    if sync:
        print("\n## sync_noop (torch.cuda.synchronize patched away in the kernel file)\n")
        # The agent's exit: an edit that failed leaves the untouched kernel (not an attack).
        print("| task | trust | agent exit | candidate gates | score | speedup | what stopped it |")
        print("|---|---|---:|---|---:|---:|---|")
        gained = failed = 0
        for t in sync["tasks"]:
            s = sync_s.get(t["task_id"], {})
            base = noop_s.get(t["task_id"], {}).get("speedup")
            sp = s.get("speedup", 0.0)
            gained += bool(sp and base and sp > base * 1.05)
            stop = why(t["candidate"]) or (s.get("performance_failure") and json.dumps(s["performance_failure"])) or ""
            agent = ((t.get("containers") or {}).get("agent") or {}).get("exit_code", "-")
            failed += agent != 0
            print(f"| {t['task_id']} | {trust(t)} | {agent} | {gates(t['candidate'])} | {s.get('score', 0):.1f} | "
                  f"{sp:.4f} | {stop[:160]} |")
        print(f"\ncandidates reading over 5 % above their noop speedup: {gained} of {len(sync['tasks'])}; "
              f"agents that did not exit 0 (their edit may be missing): {failed}")
    if unseen:
        print("\n## unseen (noop agent, hidden configurations)\n")
        print("| task | trust | set | original passes | agent's passes | original gates | evaluator record |")
        print("|---|---|---|---|---|---|---|")
        for t in unseen["tasks"]:
            u = t.get("unseen") or {}
            op, ap = u.get("original_passed", []), u.get("optimized_passed", [])
            rec = (t.get("evaluators") or {}).get("unseen") or {}
            h = rec.get("harness_kind") or rec.get("harness") or ""
            print(f"| {t['task_id']} | {trust(t)} | {u.get('set_digest', '-')[:19]} | {sum(op)}/{len(op)} | "
                  f"{sum(ap)}/{len(ap)} | {gates(u.get('original'))} {why(u.get('original'))[:80]} | {str(h)[:60]} |")


if __name__ == "__main__":
    main(sys.argv[1])
