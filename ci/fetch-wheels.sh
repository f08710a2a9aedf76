#!/usr/bin/env bash
# Fetches the pinned wheels of a recipe's `wheels` layers into DIR from PyPI (its simple index,
# PEP 691 JSON, names each file's URL), skipping those already there, and checks each against the sha256 the
# recipe pins; a file with another hash is never kept. ARENA_PYPI_URL points at a mirror
# (default https://pypi.org).
# usage: ci/fetch-wheels.sh RECIPE.toml DIR
set -euo pipefail
recipe=${1:?usage: fetch-wheels.sh RECIPE.toml DIR}
dir=${2:?usage: fetch-wheels.sh RECIPE.toml DIR}
mkdir -p "$dir"
# One fetch of DIR at a time: tests run side by side (nextest: a process per test) and may
# fetch into the same DIR; a second fetch waits, then finds the files there.
exec 9>"$dir/.fetch.lock"
flock 9
exec python3 - "$recipe" "$dir" <<'PY'
import hashlib, json, os, re, sys, tomllib, urllib.request
recipe, out = sys.argv[1], sys.argv[2]
index = os.environ.get("ARENA_PYPI_URL", "https://pypi.org").rstrip("/")
pins = [w for l in tomllib.load(open(recipe, "rb")).get("layer", [])
        if l.get("kind") == "wheels" for w in l["wheels"]]

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

status = 0
for w in pins:
    file, want = w["file"], w["sha256"]
    dest = os.path.join(out, file)
    if os.path.exists(dest) and sha256(dest) == want:
        continue
    name = re.sub(r"[-_.]+", "-", file.split("-")[0]).lower()
    try:
        req = urllib.request.Request(f"{index}/simple/{name}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            meta = json.load(r)
        url = next((u["url"] for u in meta["files"] if u["filename"] == file), None)
        if url is None:
            print(f"fetch-wheels: {file}: not among the files of {name} on {index}", file=sys.stderr)
            status = 1
            continue
        part = dest + ".part"
        print(f"fetch-wheels: {file}", file=sys.stderr)
        with urllib.request.urlopen(url, timeout=600) as r, open(part, "wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
        found = sha256(part)
        if found != want:
            os.remove(part)
            print(f"fetch-wheels: {file}: sha256 {found}, but {recipe} pins {want}", file=sys.stderr)
            status = 1
            continue
        os.replace(part, dest)
    except OSError as e:
        print(f"fetch-wheels: {file}: {e}", file=sys.stderr)
        status = 1
sys.exit(status)
PY
