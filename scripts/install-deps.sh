#!/usr/bin/env bash
# Installs every Debian package gradwire needs to build, test and run.
#
# This is the one package list of the project: the Makefile, CI and the
# Dockerfile all install through this script. It is idempotent: it installs
# only what is missing and runs `apt-get update` only when something is.
#
# Usage: scripts/install-deps.sh [--print] [--image-build | --runtime ROLE]
#   --print          print the package list and exit (used by image builds).
#   --image-build    only what an image's build stage needs: PACKAGES less
#                    IMAGE_BUILD_SKIP, no deployment-check tools.
#   --runtime ROLE   only the run-time libraries of the image of ROLE
#                    (server or worker: deploy/docker/Dockerfile; prometheus:
#                    deploy/prometheus/Dockerfile).
# Without --image-build or --runtime: PACKAGES, DEPLOY_CHECK_PACKAGES,
# CONTAINER_PACKAGES and the UNPACKED_PACKAGES (everything a developer and
# CI need).
set -euo pipefail

PACKAGES=(
  # Toolchain.
  build-essential cmake ninja-build pkg-config git ca-certificates
  clang libclang-rt-14-dev clang-format
  # Wire protocol and RPC.
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc
  libabsl-dev zlib1g-dev
  # JSON (header-only): the workers' and the cluster's summaries, the
  # benchmark reports.
  nlohmann-json3-dev
  # TLS: gradwire_tls checks certificates and keys with OpenSSL.
  libssl-dev
  # Worker: libtorch (CPU) with c10d Gloo, and OpenBLAS (OpenMP build, like
  # libtorch's threads) in place of the reference BLAS that libtorch-dev
  # brings: the CNN's matrix products run about 2x faster.
  libtorch-dev libgloo-dev libopenblas0-openmp
  # Tests and benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev
  # The Prometheus server used by integration tests.
  prometheus
  # Training data and network namespaces for cluster tests.
  dataset-fashion-mnist iproute2 openssl
  # The Python package (python/): a pybind11 extension built against
  # Debian's python3-torch (the same libtorch 1.13), its tests, and the
  # example's ResNet-18; `pip install ./python` into a virtualenv
  # (docs/python.md) with setuptools and wheel, offline.
  python3-dev python3-torch pybind11-dev python3-pytest python3-torchvision
  python3-venv python3-pip python3-setuptools python3-wheel
  # `gradwire report` and make bench-convergence draw their plots with it.
  python3-matplotlib
  # The Python manual's reStructuredText sources: the English corpus of the
  # GPT example (examples/python/gpt/).
  python3.11-doc
  # Renders the console dashboard headless in its test
  # (tests/integration/dashboard_test.py); large, so never in an image.
  chromium
)

# Not needed to build the images' binaries (tests, fuzzing, benchmarks).
IMAGE_BUILD_SKIP=(
  clang libclang-rt-14-dev clang-format libgtest-dev libgmock-dev
  libbenchmark-dev prometheus dataset-fashion-mnist iproute2 openssl
  python3-dev python3-torch pybind11-dev python3-pytest python3-torchvision
  python3-venv python3-pip python3-setuptools python3-wheel
  python3-matplotlib python3.11-doc chromium
)

# make check-deploy: docker-compose validates docker-compose.yml; Node.js and
# npm run deploy/validate. Where the installed nodejs brings its own npm
# (it then "Provides: npm"), that one counts.
DEPLOY_CHECK_PACKAGES=(docker-compose nodejs npm)

# make images and make compose-test: podman (with Debian's runc and
# aardvark-dns, the compose network's DNS) and podman-compose run the images
# where no Docker engine is; mmdebstrap makes the Debian base images where
# no registry can be reached (scripts/base-images.sh). Never inside an image.
CONTAINER_PACKAGES=(podman podman-compose runc aardvark-dns mmdebstrap)

# Unpacked into $TOOLS_DIR/PACKAGE instead of installed: on many machines
# another repository's kubectl package owns /usr/bin/kubectl, and Debian's
# kubernetes-client (kubectl 1.20, whose `kubectl kustomize` renders
# deploy/k8s for make check-deploy) cannot be installed beside it.
UNPACKED_PACKAGES=(kubernetes-client)
TOOLS_DIR=${GRADWIRE_TOOLS_DIR:-/opt/gradwire-tools}

# Run-time libraries of the images (deploy/docker/Dockerfile). The shard has
# no libtorch; the worker adds it, Gloo and the training data.
RUNTIME_SERVER_PACKAGES=(
  libabsl20220623 libgrpc++1.51 libgrpc29 libprotobuf32 zlib1g
  libssl3
)
RUNTIME_WORKER_PACKAGES=(
  "${RUNTIME_SERVER_PACKAGES[@]}" libtorch1.13 libgloo0 libopenblas0-openmp
  dataset-fashion-mnist
)
# deploy/prometheus/Dockerfile: Debian's Prometheus server.
RUNTIME_PROMETHEUS_PACKAGES=(prometheus)

usage() {
  echo "usage: $0 [--print] [--image-build | --runtime server|worker|prometheus]" >&2
  exit 2
}

print=false
mode=all
while [[ $# -gt 0 ]]; do
  case "$1" in
    --print) print=true ;;
    --image-build) mode=image-build ;;
    --runtime)
      [[ $# -ge 2 ]] || usage
      case "$2" in
        server | worker | prometheus) mode="runtime-$2" ;;
        *) usage ;;
      esac
      shift
      ;;
    *) usage ;;
  esac
  shift
done

selected=()
unpack=()
case "$mode" in
  all)
    selected=("${PACKAGES[@]}" "${DEPLOY_CHECK_PACKAGES[@]}" "${CONTAINER_PACKAGES[@]}")
    unpack=("${UNPACKED_PACKAGES[@]}")
    ;;
  image-build)
    for pkg in "${PACKAGES[@]}"; do
      if [[ " ${IMAGE_BUILD_SKIP[*]} " != *" $pkg "* ]]; then
        selected+=("$pkg")
      fi
    done
    ;;
  runtime-server) selected=("${RUNTIME_SERVER_PACKAGES[@]}") ;;
  runtime-worker) selected=("${RUNTIME_WORKER_PACKAGES[@]}") ;;
  runtime-prometheus) selected=("${RUNTIME_PROMETHEUS_PACKAGES[@]}") ;;
esac

if $print; then
  printf '%s\n' "${selected[@]}" "${unpack[@]}"
  exit 0
fi

# Virtual packages that installed packages provide (nodesource's nodejs
# provides npm, for one).
provided=" $(dpkg-query -W -f='${db:Status-Abbrev}|${Provides}\n' 2>/dev/null |
  sed -n 's/^ii *|//p' | tr ',' '\n' | sed 's/ *(.*)//; s/^ *//' |
  tr '\n' ' ' || true) "

missing=()
for pkg in "${selected[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" && "$provided" != *" $pkg "* ]]; then
    missing+=("$pkg")
  fi
done
missing_unpack=()
for pkg in "${unpack[@]}"; do
  if [[ ! -f "$TOOLS_DIR/$pkg/.unpacked" ]]; then missing_unpack+=("$pkg"); fi
done

if [[ ${#missing[@]} -eq 0 && ${#missing_unpack[@]} -eq 0 ]]; then
  echo "install-deps: all $(( ${#selected[@]} + ${#unpack[@]} )) packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]} ${missing_unpack[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
if [[ ${#missing[@]} -gt 0 ]]; then
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
for pkg in "${missing_unpack[@]}"; do
  download=$(mktemp -d)
  # apt-get download writes into the current directory, as the _apt user
  # where it can.
  chmod 0777 "$download"
  (cd "$download" && apt-get download -q "$pkg")
  $SUDO rm -rf "${TOOLS_DIR:?}/$pkg"
  $SUDO mkdir -p "$TOOLS_DIR/$pkg"
  $SUDO dpkg-deb -x "$download"/"$pkg"_*.deb "$TOOLS_DIR/$pkg"
  dpkg-deb -f "$download"/"$pkg"_*.deb Version |
    $SUDO tee "$TOOLS_DIR/$pkg/.unpacked" >/dev/null
  rm -rf "$download"
  echo "install-deps: unpacked $pkg into $TOOLS_DIR/$pkg"
done
