#!/usr/bin/env bash
# Fetches the pinned .deb files of a recipe's `debs` layers into DIR with `apt-get download`,
# skipping those already there, and checks each against the sha256 the recipe pins.
# usage: ci/fetch-debs.sh RECIPE.toml DIR
set -euo pipefail
recipe=${1:?usage: fetch-debs.sh RECIPE.toml DIR}
dir=${2:?usage: fetch-debs.sh RECIPE.toml DIR}
mkdir -p "$dir"
# One fetch of DIR at a time: tests run side by side (nextest: a process per test) and may
# fetch into the same DIR; a second fetch waits, then finds the files there.
exec 9>"$dir/.fetch.lock"
flock 9
# Its own list (the lock above already keeps a second fetch out).
wanted=$(mktemp)
trap 'rm -f "$wanted"' EXIT
python3 - "$recipe" <<'PY' > "$wanted"
import sys, tomllib
r = tomllib.load(open(sys.argv[1], "rb"))
for layer in r.get("layer", []):
    if layer.get("kind") == "debs":
        for p in layer["packages"]:
            print(p["name"], p["version"], p.get("arch", "amd64"), p["sha256"])
PY
missing=()
while read -r name version arch sha; do
  file="$dir/${name}_${version//:/%3a}_${arch}.deb"
  if [ ! -f "$file" ] || [ "$(sha256sum "$file" | cut -d' ' -f1)" != "$sha" ]; then
    rm -f "$file"; missing+=("$name=$version")
  fi
done < "$wanted"
if [ ${#missing[@]} -gt 0 ]; then
  [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit 2>/dev/null)" ] || apt-get update -qq
  if ! (cd "$dir" && apt-get download -q "${missing[@]}" 2>&1 | grep -v "unsandboxed"; exit "${PIPESTATUS[0]}"); then
    # Package lists older than the pinned versions: refresh them once and try again.
    apt-get update -qq
    (cd "$dir" && apt-get download -q "${missing[@]}" 2>&1 | grep -v "unsandboxed" || true)
  fi
fi
status=0
while read -r name version arch sha; do
  file="$dir/${name}_${version//:/%3a}_${arch}.deb"
  if [ ! -f "$file" ]; then
    echo "fetch-debs: $name=$version ($arch) could not be downloaded (is that version still in the archive?)" >&2; status=1
  elif [ "$(sha256sum "$file" | cut -d' ' -f1)" != "$sha" ]; then
    echo "fetch-debs: $file: sha256 differs from the one $recipe pins ($sha)" >&2; status=1
  fi
done < "$wanted"
rm -f "$dir/.wanted"
exit $status
