#!/usr/bin/env python3
"""Fails when a crate's top-level modules depend on each other in a cycle (the tree
shows the architecture). A module depends on another when its code (not its comments, not its
tests) names `crate::other`; inside a module that is a directory (arenactl's `cmd/`), a
child depends on a sibling it names as `super::sibling` (or `super::{…}`, or by its full
path). The Python evaluator's modules (a crate's directory of `.py`
files, arena-eval's trusted/arena_trusted) are held to the same: one depends on another it
imports, at its top or inside a function. Prints each crate's verdict; exit 1 on any cycle.
usage: python3 ci/module-cycles.py [CRATES_DIR]"""
import ast
import glob
import os
import re
import sys


def test_only(src):
    """Top-level modules the crate root declares under #[cfg(test)]."""
    out = set()
    for root in ("lib.rs", "main.rs"):
        try:
            text = open(os.path.join(src, root)).read()
        except OSError:
            continue
        out |= set(re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\(crate\))? )?mod (\w+);", text))
    return out


def deps(src):
    mods = {}
    skip = test_only(src)
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs") or f.endswith("tests.rs"):
                continue
            path = os.path.join(root, f)
            top = os.path.relpath(path, src).split("/")[0].removesuffix(".rs")
            if top in ("lib", "main") or top in skip:
                continue
            code = open(path).read().split("#[cfg(test)]")[0]
            code = "\n".join(l for l in code.splitlines() if not l.lstrip().startswith("//"))
            refs = set(re.findall(r"crate::(\w+)", code)) - {top}
            mods.setdefault(top, set()).update(refs)
    return {m: {r for r in rs if r in mods} for m, rs in mods.items()}


def cycles(g):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def code_of(path):
    code = open(path).read().split("#[cfg(test)]")[0]
    return "\n".join(l for l in code.splitlines() if not l.lstrip().startswith("//"))


def nested_deps(src):
    """Per directory module below `src` (its path from `src`): each child module -> the
    siblings it names."""
    out = {}
    for root, dirs, files in sorted(os.walk(src)):
        if root == src:
            continue
        rel = os.path.relpath(root, src)
        full = "crate::" + rel.replace("/", "::") + "::"
        g = {}
        for f in sorted(files):
            if not f.endswith(".rs") or f == "mod.rs" or f.endswith("tests.rs"):
                continue
            code = code_of(os.path.join(root, f))
            refs = set(re.findall(r"super::(\w+)", code)) | set(re.findall(re.escape(full) + r"(\w+)", code))
            for group in re.findall(r"super::\{([^}]*)\}", code):
                refs |= {x.strip().split("::")[0].split(" ")[0] for x in group.split(",")}
            g[f[:-3]] = refs - {f[:-3]}
        out[rel] = {m: rs & set(g) for m, rs in g.items()}
    return out


def python_deps(folder):
    """Each module of `folder` -> the modules of `folder` it imports (anywhere in its code)."""
    names = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(folder, "*.py"))}
    g = {}
    for m in sorted(names):
        refs = set()
        for node in ast.walk(ast.parse(open(os.path.join(folder, m + ".py")).read())):
            if isinstance(node, ast.Import):
                refs |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                refs.add(node.module.split(".")[0])
        g[m] = (refs & names) - {m}
    return g


bad = False
root = sys.argv[1] if len(sys.argv) > 1 else "crates"
for folder in sorted({os.path.dirname(p) for p in glob.glob(os.path.join(root, "*/*/*/*.py"))}):
    if "/src/" in folder + "/" or "/tests/" in folder + "/":
        continue
    found = cycles(python_deps(folder))
    where = os.path.relpath(folder, root)
    if found:
        bad = True
        print(f"{where} (Python): modules import each other in a cycle: {found}")
    else:
        print(f"{where} (Python): no import cycles")
for src in sorted(glob.glob(os.path.join(root, "*/src"))):
    found = cycles(deps(src))
    for rel, g in nested_deps(src).items():
        found += [[f"{rel}::{m}" for m in c] for c in cycles(g)]
    crate = os.path.basename(os.path.dirname(src))
    if found:
        bad = True
        print(f"{crate}: modules depend on each other in a cycle: {found}")
    else:
        print(f"{crate}: no module cycles")
sys.exit(1 if bad else 0)
