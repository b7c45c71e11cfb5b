#!/usr/bin/env bash
# Installs every Debian package gradwire needs to build, test and run.
#
# This is the one package list of the project: the Makefile, CI and the
# Dockerfile all install through this script. It is idempotent: it installs
# only what is missing and runs `apt-get update` only when something is.
#
# Usage: scripts/install-deps.sh [--print]
#   --print  print the package list and exit (used by image builds).
set -euo pipefail

PACKAGES=(
  # Toolchain.
  build-essential cmake ninja-build pkg-config git ca-certificates
  clang libclang-rt-14-dev clang-format
  # Wire protocol and RPC.
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc
  libabsl-dev zlib1g-dev
  # Worker: libtorch (CPU) with c10d Gloo.
  libtorch-dev libgloo-dev
  # Tests and benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev
  # Metrics endpoint and the Prometheus server used by integration tests.
  libcivetweb-dev prometheus
  # Training data and network namespaces for cluster tests.
  dataset-fashion-mnist iproute2 openssl
)

if [[ "${1:-}" == "--print" ]]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
