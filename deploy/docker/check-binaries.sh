#!/bin/sh
# Run by deploy/docker/Dockerfile after it copies the binaries into an
# image: every shared library of each BINARY resolves, and each one starts
# (--help). A failure fails the image build.
#
# Usage: check-binaries.sh BINARY...
set -eu
for binary in "$@"; do
  if ldd "$binary" | grep 'not found'; then
    echo "$binary: missing shared libraries (above)" >&2
    exit 1
  fi
  if ! "$binary" --help >/dev/null 2>&1; then
    echo "$binary --help fails:" >&2
    "$binary" --help >&2 || true
    exit 1
  fi
done
