#!/usr/bin/env bash
# Runs every libFuzzer target, one after the other, each for a while on a
# scratch copy of its seed corpus:
#   decode  the wire decoder (decode_fuzz.cc, corpus/decode)
#   push    Shard::Push and Pull end to end (push_fuzz.cc, corpus/push)
#   init    Shard::Init end to end (init_fuzz.cc, corpus/init)
#   restore a shard's start-up over checkpoint and log files
#           (restore_fuzz.cc, corpus/restore; its event lines to stderr are
#           dropped with -close_fd_mask=2, libFuzzer's own output stays)
#   getinfo a GetInfo request as the service takes it: fields counted,
#           parsed, answered (getinfo_fuzz.cc, corpus/getinfo)
#   pull    a Pull request as the service takes it: fields counted, parsed,
#           Shard::Pull (pull_fuzz.cc, corpus/pull)
#
# Usage: tests/fuzz/run-fuzz.sh BUILD_DIR SECONDS
#   BUILD_DIR  a build configured with -DGRADWIRE_BUILD_FUZZERS=ON (clang)
#   SECONDS    fuzzing time of EACH target (-max_total_time)
#
# Exits non-zero when a fuzzer finds a crash (after running the others);
# the crashing input is kept in BUILD_DIR/fuzz-artifacts/<target>/
# (reproduce with: BUILD_DIR/bin/gradwire-fuzz-<target> FILE). The seed
# corpora in the source tree are never modified.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
seconds=$2
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "SECONDS must be a whole number >= 1, got '$seconds'" >&2
  exit 2
fi
corpora="$(cd "$(dirname "$0")" && pwd)/corpus"
targets=(decode push init restore getinfo pull)

for target in "${targets[@]}"; do
  if [[ ! -x "$build_dir/bin/gradwire-fuzz-$target" ]]; then
    echo "$build_dir/bin/gradwire-fuzz-$target not found:" \
      "build target gradwire-fuzz-$target first" >&2
    exit 2
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=()
for target in "${targets[@]}"; do
  echo "=== fuzzing $target for ${seconds}s (gradwire-fuzz-$target)"
  mkdir -p "$work/$target" "$build_dir/fuzz-artifacts/$target"
  cp "$corpora/$target"/* "$work/$target/"
  extra=()
  if [[ $target == restore ]]; then extra=(-close_fd_mask=2); fi
  if ! "$build_dir/bin/gradwire-fuzz-$target" "$work/$target" "${extra[@]}" \
    -max_total_time="$seconds" \
    -max_len=65536 \
    -timeout=10 \
    -rss_limit_mb=2048 \
    -print_final_stats=1 \
    -artifact_prefix="$build_dir/fuzz-artifacts/$target/"; then
    echo "=== $target FAILED: see $build_dir/fuzz-artifacts/$target/" >&2
    failed+=("$target")
  fi
done

if ((${#failed[@]} > 0)); then
  echo "=== fuzz targets that found a crash: ${failed[*]}" >&2
  exit 1
fi
echo "=== every target ran ${seconds}s without a crash: ${targets[*]}"
