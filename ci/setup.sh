#!/usr/bin/env bash
# Installs what arena needs on a fresh Debian machine that has a Rust toolchain: python3 for the
# CPU sample tasks' harnesses, skopeo and umoci (independent readers of our OCI layouts, used by
# the tests), containerd and runc (the runtime's integration tests start a private daemon), Slurm
# and munge (the Slurm backend's tests start a single-node cluster), gcc with a static libc
# (a test's seccomp probe), chromium (the HTML report's test), CNI plugins and nftables
# (agents' egress network), and protoc (containerd-client compiles containerd's protos).
# Idempotent and quiet when everything is already there.
set -euo pipefail
need=()
command -v python3 >/dev/null || need+=(python3)
command -v skopeo >/dev/null || need+=(skopeo)
command -v umoci >/dev/null || need+=(umoci)
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
command -v protoc >/dev/null || need+=(protobuf-compiler)
# Agents' egress network (CNI ptp + host-local; nftables, which also masquerades) and the
# network tests' namespaces (iproute2). Not iptables: arena never runs it.
[ -x /usr/lib/cni/ptp ] || need+=(containernetworking-plugins)
command -v nft >/dev/null || need+=(nftables)
command -v ip >/dev/null || need+=(iproute2)
# gcc and a static libc: the adversarial tests build a static seccomp probe (ci/fixtures).
command -v gcc >/dev/null || need+=(gcc)
[ -n "$(gcc -print-file-name=libc.a 2>/dev/null | grep /)" ] || need+=(libc6-dev)
# A headless browser: the HTML report's test opens it in chromium and checks what it renders.
command -v chromium >/dev/null || need+=(chromium)
# A real single-node Slurm for the Slurm backend's tests (ci/slurm.sh).
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sbatch >/dev/null || need+=(slurm-client)
command -v munged >/dev/null || need+=(munge)
# A real OCI registry (distribution 2.8) on 127.0.0.1 for the registry tests.
command -v docker-registry >/dev/null || need+=(docker-registry)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
command -v cargo >/dev/null || { echo "ci/setup.sh: cargo not found; install a Rust toolchain (rustup) first" >&2; exit 1; }
