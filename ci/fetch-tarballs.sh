#!/usr/bin/env bash
# Fetches the pinned archives of a recipe's `tarball` layers that name a `url` (a package
# registry's tarball) into DIR, skipping those already there, and checks each against the
# sha256 the recipe pins. The file name is the url's last part; the recipe's `path` should be
# ${ARENA_TARBALL_DIR}/that name.
# usage: ci/fetch-tarballs.sh RECIPE.toml DIR
set -euo pipefail
recipe=${1:?usage: fetch-tarballs.sh RECIPE.toml DIR}
dir=${2:?usage: fetch-tarballs.sh RECIPE.toml DIR}
mkdir -p "$dir"
# One fetch of DIR at a time: tests run side by side (nextest: a process per test) and may
# fetch into the same DIR; a second fetch waits, then finds the files there.
exec 9>"$dir/.fetch.lock"
flock 9
# Its own list and partial files (the lock above already keeps a second fetch out).
wanted=$(mktemp)
trap 'rm -f "$wanted"' EXIT
python3 - "$recipe" <<'PY' > "$wanted"
import sys, tomllib
r = tomllib.load(open(sys.argv[1], "rb"))
for i, layer in enumerate(r.get("layer", [])):
    if layer.get("kind") == "tarball" and layer.get("url"):
        if not layer.get("sha256"):
            sys.exit(f"{sys.argv[1]}: layer[{i}] names a url without a sha256 to check it by")
        print(layer["url"], layer["sha256"])
PY
status=0
while read -r url sha; do
  file="$dir/${url##*/}"
  if [ -f "$file" ] && [ "$(sha256sum "$file" | cut -d' ' -f1)" = "$sha" ]; then continue; fi
  part="$file.part.$$"
  if ! curl -fsSL --retry 3 -o "$part" "$url"; then
    echo "fetch-tarballs: $url could not be downloaded" >&2; rm -f "$part"; status=1; continue
  fi
  got=$(sha256sum "$part" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    echo "fetch-tarballs: $url: sha256 $got is not the $sha $recipe pins" >&2; rm -f "$part"; status=1; continue
  fi
  mv -f "$part" "$file"
done < "$wanted"
exit $status
