#!/usr/bin/env bash
# Installs what the test suite needs beyond ci/setup.sh's: skopeo and umoci (independent readers
# of arena's OCI layouts), a static libc (the adversarial tests build a static seccomp probe,
# ci/fixtures), chromium (the HTML report's test), Slurm and munge (a real single-node cluster,
# ci/slurm.sh) and docker-registry (a real OCI registry on 127.0.0.1). Never needed on a lab
# machine. Idempotent and quiet when everything is already there.
set -euo pipefail
bash "$(dirname "$0")/setup.sh"
need=()
command -v skopeo >/dev/null || need+=(skopeo)
command -v umoci >/dev/null || need+=(umoci)
[ -n "$(gcc -print-file-name=libc.a 2>/dev/null | grep /)" ] || need+=(libc6-dev)
command -v chromium >/dev/null || need+=(chromium)
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sbatch >/dev/null || need+=(slurm-client)
command -v munged >/dev/null || need+=(munge)
command -v docker-registry >/dev/null || need+=(docker-registry)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
