#!/usr/bin/env bash
# Installs what arena needs on a fresh Debian machine that has a Rust toolchain, to build it and
# to run benchmarks: python3 (the CPU sample tasks' harnesses), containerd and runc (every task
# run's containers), CNI plugins, nftables and iproute2 (agents' egress network), and protoc
# (containerd-client compiles containerd's protos). The test suite's extra services are
# ci/setup-tests.sh's. Idempotent and quiet when everything is already there.
set -euo pipefail
need=()
command -v python3 >/dev/null || need+=(python3)
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
command -v protoc >/dev/null || need+=(protobuf-compiler)
# Agents' egress network (CNI ptp + host-local; nftables, which also masquerades) and network
# namespaces (iproute2). Not iptables: arena never runs it.
[ -x /usr/lib/cni/ptp ] || need+=(containernetworking-plugins)
command -v nft >/dev/null || need+=(nftables)
command -v ip >/dev/null || need+=(iproute2)
# A C compiler for the crates that build C code.
command -v gcc >/dev/null || need+=(gcc)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
command -v cargo >/dev/null || { echo "ci/setup.sh: cargo not found; install a Rust toolchain (rustup) first" >&2; exit 1; }
