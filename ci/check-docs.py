#!/usr/bin/env python3
"""Checks the tree's text for two things a reader cannot resolve:

1. Words of the project's own development history: "stop 57", "issue 40", a "lent" machine,
   "this 2-core machine", "this session". Users and maintainers cannot look these up; name a
   commit, a version or a date instead (history lives in git).
2. Paths that do not exist: every relative link of the README and docs/ (markdown links and
   `code spans` that name a file of the tree), and every repository path named in a code span
   anywhere in those files, must be in the tree.

Exit 1 naming each file, line and what was found; 0 when clean. Third-party data under
ci/fixtures/ (AgentKernelArena's and KernelBench's files, kept as they are) is not read.

usage: python3 ci/check-docs.py [ROOT]
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))

# The development history's words (case-insensitive).
HISTORY = re.compile(
    r"\bstops? [0-9]+\b|\bissues? #?[0-9]+\b|\blent\b|\bthis 2-core machine\b|\bthis session\b"
    r"|\bthe device takes\b|\bdevice tool\b",
    re.IGNORECASE,
)
# Text files of ours that are read (by suffix), and what is not ours.
SUFFIXES = (".md", ".rs", ".py", ".sh", ".toml", ".yaml", ".yml", ".c", ".proto", ".txt")
SKIP = ("ci/fixtures/aka/", "ci/fixtures/aka-slice/", "ci/fixtures/aka-vllm/", "ci/fixtures/kernelbench-", "ci/check-docs.py")
# Where a code span names a path of the tree.
TOP = ("crates/", "ci/", "docs/", "images/", "lockfiles/", "tasks/", "agents/", "proto/", ".ci/")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
SPAN = re.compile(r"`([^`\s]+)`")


def tracked():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def exists(path):
    return os.path.exists(os.path.join(ROOT, path))


def path_problems(rel, lineno, line):
    """Relative links and code-span paths of a markdown line that name nothing in the tree."""
    found = []
    base = os.path.dirname(rel)
    for target in LINK.findall(line):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:, ...
            continue
        path = os.path.normpath(os.path.join(base, target))
        if not exists(path):
            found.append(f"{rel}:{lineno}: link to {target}, which is not in the tree")
    for span in SPAN.findall(line):
        span = span.rstrip(".,:;)")
        if not span.startswith(TOP) or any(c in span for c in "*?{}<>|$…") or "=" in span:
            continue
        # A placeholder (`lockfiles/SET.lock`, `tasks/ID`): a part in capitals names no file.
        if any(re.fullmatch(r"[A-Z][A-Z_]*(\.[a-z]+)?", part) for part in span.split("/")):
            continue
        if span.endswith("/"):
            span = span[:-1]
        # A path with a line number or a test name after it (`file.rs:12`, `file.rs::name`).
        span = re.split(r":(?=[0-9A-Za-z_])", span)[0]
        if not exists(span):
            found.append(f"{rel}:{lineno}: `{span}` is not in the tree")
    return found


def main():
    problems = []
    for rel in tracked():
        if rel.startswith(SKIP) or not rel.endswith(SUFFIXES):
            continue
        try:
            text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        markdown = rel.endswith(".md")
        for lineno, line in enumerate(text.splitlines(), 1):
            for m in HISTORY.finditer(line):
                problems.append(f"{rel}:{lineno}: development history ({m.group(0)!r}): name a commit, a version or a date")
            if markdown:
                problems.extend(path_problems(rel, lineno, line))
    for p in problems:
        print(p)
    if problems:
        print(f"ci/check-docs.py: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("ci/check-docs.py: no development history, every path in the tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
