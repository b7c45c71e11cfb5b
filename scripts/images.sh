#!/usr/bin/env bash
# Builds gradwire's images with docker or podman (scripts/container-engine.sh
# picks the engine): gradwire-server and gradwire-worker from
# deploy/docker/Dockerfile, gradwire-prometheus from
# deploy/prometheus/Dockerfile, all tagged :latest, the names that
# docker-compose.yml runs. Makes the Debian base images first where they
# cannot be pulled (scripts/base-images.sh), and prints each image's size.
#
# Usage: scripts/images.sh [--prebuilt DIR] [--jobs N]
#   (default)       make images: compiles the binaries inside the image build
#                   (targets server and worker), as a user's
#                   `docker compose build` does.
#   --prebuilt DIR  make images-prebuilt: the run-time images from the
#                   binaries in DIR/bin (a build directory of this machine,
#                   Debian bookworm), stripped of debug information (targets
#                   server-prebuilt and worker-prebuilt); nothing compiles.
#   --jobs N        parallel compile jobs in the image build (default: all
#                   cores).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/container-engine.sh
source scripts/container-engine.sh

prebuilt=""
jobs=$(nproc)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prebuilt) [[ $# -ge 2 ]] || { echo "--prebuilt needs a directory" >&2; exit 2; }; prebuilt=$2; shift ;;
    --jobs) [[ $# -ge 2 ]] || { echo "--jobs needs a number" >&2; exit 2; }; jobs=$2; shift ;;
    *) echo "usage: $0 [--prebuilt DIR] [--jobs N]" >&2; exit 2 ;;
  esac
  shift
done

BINARIES=(gradwire-server gradwire-worker gradwire)
# podman's default OCI format has no HEALTHCHECK; the Docker format keeps it.
BUILD_ARGS=()
if [[ "$ENGINE" == podman ]]; then BUILD_ARGS+=(--format docker); fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

suffix=""
if [[ -n "$prebuilt" ]]; then
  for binary in "${BINARIES[@]}"; do
    if [[ ! -x "$prebuilt/bin/$binary" ]]; then
      echo "images: $prebuilt/bin/$binary is missing: build it first (make build BUILD=$prebuilt)" >&2
      exit 1
    fi
    # Debug information would double the images (RelWithDebInfo builds).
    strip --strip-debug -o "$WORK/$binary" "$prebuilt/bin/$binary"
  done
  # Libraries the host build links from outside Debian's packages (the CUDA
  # runtime of a build with the CUDA kernels, under /usr/local) travel with
  # the binaries; the image's packages provide everything else.
  mkdir -p "$WORK/lib"
  for binary in "${BINARIES[@]}"; do
    ldd "$prebuilt/bin/$binary" | awk '$3 ~ "^/usr/local/" { print $3 }' |
      while read -r library; do cp -L "$library" "$WORK/lib/"; done
  done
  BUILD_ARGS+=(--build-context "binaries=$WORK")
  suffix=-prebuilt
else
  BUILD_ARGS+=(--build-arg "BUILD_JOBS=$jobs")
fi

scripts/base-images.sh

# build IMAGE DOCKERFILE [TARGET]: builds and tags IMAGE:latest; the
# engine's output goes to a log that is shown when the build fails.
build() {
  local image=$1 dockerfile=$2 target=${3:-} started=$SECONDS args=()
  if [[ -n "$target" ]]; then args+=(--target "$target"); fi
  echo "images: building $image:latest ($dockerfile${target:+, target $target}) with $ENGINE"
  if ! "$ENGINE" build "${BUILD_ARGS[@]}" "${args[@]}" -f "$dockerfile" \
    -t "$image:latest" . >"$WORK/$image.log" 2>&1; then
    tail -40 "$WORK/$image.log" >&2
    echo "images: building $image failed (the engine's last lines above)" >&2
    return 1
  fi
  echo "images: built $image:latest in $((SECONDS - started)) s"
}

started=$SECONDS
build gradwire-server deploy/docker/Dockerfile "server$suffix"
build gradwire-worker deploy/docker/Dockerfile "worker$suffix"
build gradwire-prometheus deploy/prometheus/Dockerfile
echo "images: all built in $((SECONDS - started)) s"
for image in gradwire-server gradwire-worker gradwire-prometheus; do
  bytes=$("$ENGINE" image inspect --format '{{.Size}}' "$image:latest")
  printf 'images: %-20s %5d MB\n' "$image" $((bytes / 1000000))
done
