#!/usr/bin/env bash
# Runs the decode fuzzer for a while on a scratch copy of the seed corpus.
#
# Usage: tests/fuzz/run-fuzz.sh BUILD_DIR SECONDS
#   BUILD_DIR  a build configured with -DGRADWIRE_BUILD_FUZZERS=ON (clang)
#   SECONDS    total fuzzing time (-max_total_time)
#
# Exits non-zero when the fuzzer finds a crash; the crashing input is kept in
# BUILD_DIR/fuzz-artifacts/ (reproduce with: BUILD_DIR/bin/gradwire-fuzz-decode
# FILE). The seed corpus in the source tree is never modified.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
seconds=$2
fuzzer="$build_dir/bin/gradwire-fuzz-decode"
seeds="$(cd "$(dirname "$0")" && pwd)/corpus/decode"

if [[ ! -x "$fuzzer" ]]; then
  echo "$fuzzer not found: build target gradwire-fuzz-decode first" >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$build_dir/fuzz-artifacts"
cp "$seeds"/* "$work/corpus/"

"$fuzzer" "$work/corpus" \
  -max_total_time="$seconds" \
  -max_len=65536 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -print_final_stats=1 \
  -artifact_prefix="$build_dir/fuzz-artifacts/"
