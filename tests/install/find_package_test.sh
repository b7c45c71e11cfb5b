#!/usr/bin/env bash
# gradwire as a C++ package (docs/cpp-package.md), as a user installs and
# uses it:
#   1. `cmake --install` of the development and libraries components into a
#      fresh prefix; every file it writes lies under that prefix;
#   2. tests/install/client_only, a project with
#      find_package(gradwire COMPONENTS client), is configured against the
#      prefix, built, and its program fails to connect where nothing listens
#      with UNAVAILABLE;
#   3. with the worker: examples/custom_training_loop, a project with
#      find_package(gradwire) and gradwire::worker, is configured, built and
#      run (--helpfull lists its flags; bad flags exit 2).
#
# Usage: find_package_test.sh BUILD_DIR SOURCE_DIR WITH_WORKER(ON|OFF)
#            [CMAKE_ARG...]
# The CMAKE_ARGs (the compiler, Torch_DIR) go to both projects' configure.
set -euo pipefail

if [[ $# -lt 3 || ! -f "$1/cmake_install.cmake" || ! -d "$2/examples" ]]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR WITH_WORKER(ON|OFF) [CMAKE_ARG...]" >&2
  exit 2
fi
build=$1
source=$2
with_worker=$3
shift 3
cmake_args=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() {
  echo "== $* (${SECONDS}s)"
}

step "install into $prefix"
for component in development libraries; do
  cmake --install "$build" --prefix "$prefix" --component "$component" \
    >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "cmake --install $build"; }
  manifest=$build/install_manifest_$component.txt
  if outside=$(grep -v "^$prefix/" "$manifest"); then
    fail "installed outside $prefix: $outside"
  fi
done
[[ -n $(find "$prefix" -path "*/cmake/gradwire/gradwireConfig.cmake") ]] ||
  fail "no cmake/gradwire/gradwireConfig.cmake under $prefix"

# A project of its own: configured against the prefix, built.
build_project() {
  local project=$1 into=$2
  cmake -S "$project" -B "$into" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    "${cmake_args[@]}" >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log" >&2; fail "configuring $project"; }
  cmake --build "$into" ||
    fail "building $project against the installed gradwire"
}

step "client only"
build_project "$source/tests/install/client_only" "$work/client_only"
dead=127.0.0.1:$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
"$work/client_only/connect_nowhere" "$dead" >"$work/client.out" ||
  fail "connect_nowhere $dead: $(cat "$work/client.out")"
grep -q "UNAVAILABLE" "$work/client.out" ||
  fail "connect_nowhere printed no UNAVAILABLE: $(cat "$work/client.out")"
cat "$work/client.out"

if [[ $with_worker == ON ]]; then
  step "examples/custom_training_loop"
  build_project "$source/examples/custom_training_loop" "$work/example"
  example=$work/example/gradwire-example-custom-loop
  # Abseil's help exits 1.
  "$example" --helpfull >"$work/help.out" 2>&1 || true
  grep -q -- "--shards" "$work/help.out" ||
    fail "$example --helpfull lists no --shards: $(head -20 "$work/help.out")"
  code=0
  "$example" --num_workers=0 >"$work/bad.out" 2>&1 || code=$?
  [[ $code -eq 2 ]] ||
    fail "$example --num_workers=0 exited $code, not 2: $(cat "$work/bad.out")"
else
  [[ ! -e $prefix/include/gradwire/worker.h ]] ||
    fail "gradwire/worker.h installed by a build without the worker"
fi
step "ok"
