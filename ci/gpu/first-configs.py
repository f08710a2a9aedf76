#!/usr/bin/env python3
"""Keeps the first N visible configurations of AgentKernelArena tasks materialized with a derived
harness, so that a run of several tasks fits a GPU machine's time (every configuration is
judged the same way; a task with fewer is the same task, smaller). The list is the one the
derived harness names (`cases=` in arena_harness.py); its literal in the runner is replaced by
the literal of its first N entries, so that `arenactl unseen generate` reads the same list.

usage: ci/gpu/first-configs.py N TASK_DIR...   (prints what it did per task; a task whose list is
not a literal it can cut is named and left whole)
"""
import ast
import re
import sys


def cut(task, n):
    harness = open(f"{task}/arena_harness.py").read()
    m = re.search(r'runner="([^"]+)".*cases="([A-Za-z_][A-Za-z0-9_]*)"', harness)
    if not m:
        return "left whole: arena_harness.py is not a derived harness"
    runner, name = f"{task}/{m.group(1)}", m.group(2)
    src = open(runner).read()
    for node in ast.parse(src).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            if not isinstance(node.value, (ast.List, ast.Tuple)):
                return f"left whole: {runner}: {name} is not a list literal"
            kept = node.value.elts[:n]
            text = "[" + ", ".join(ast.get_source_segment(src, e) for e in kept) + ",]"
            lines = src.splitlines(keepends=True)
            start = sum(len(line) for line in lines[: node.value.lineno - 1]) + node.value.col_offset
            end = sum(len(line) for line in lines[: node.value.end_lineno - 1]) + node.value.end_col_offset
            open(runner, "w").write(src[:start] + text + src[end:])
            return f"{name}: {len(kept)} of {len(node.value.elts)}"
    return f"left whole: {runner} assigns no {name} at module level"


if __name__ == "__main__":
    n = int(sys.argv[1])
    for t in sys.argv[2:]:
        print(f"{t}: {cut(t, n)}")
