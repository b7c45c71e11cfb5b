#!/usr/bin/env bash
# gradwire-server over a checkpoint directory whose state cannot be read
# (server/durability/durable_state.h), as a user runs it:
#   1. a garbage checkpoint: the server exits 1 before listening, with one
#      "cannot start: DATA_LOSS" line naming the file, and the file stays;
#   2. the same with --discard-unreadable-state: the file is moved into
#      discarded-*/ (logged), the server starts fresh and stops cleanly.
#
# Usage: unreadable_state_test.sh PATH/TO/gradwire-server
set -euo pipefail

if [[ $# -ne 1 || ! -x "$1" ]]; then
  echo "usage: $0 PATH/TO/gradwire-server" >&2
  exit 2
fi
server=$1
work=$(mktemp -d)
pid=
cleanup() {
  if [[ -n "$pid" ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- server stderr:" >&2
  cat "$work/stderr" >&2 || true
  exit 1
}

dir=$work/shard
mkdir -p "$dir"
checkpoint=$dir/checkpoint-000000000001.gwck
printf 'GWCKPT01 not a checkpoint' >"$checkpoint"
common=(--checkpoint-dir="$dir" --address=127.0.0.1 --port=0
  --metrics-port=-1 --port-file="$work/port")

# 1. Refused.
rc=0
timeout 20 "$server" "${common[@]}" >"$work/stdout" 2>"$work/stderr" || rc=$?
[[ $rc -eq 1 ]] || fail "exit code $rc, expected 1"
grep -q "cannot start: DATA_LOSS: unreadable checkpoint $checkpoint" \
  "$work/stderr" || fail "no refusal naming $checkpoint"
[[ ! -s "$work/stdout" ]] || fail "it printed a listening line"
[[ -f "$checkpoint" ]] || fail "the checkpoint was moved without the flag"

# 2. Moved aside, started fresh.
"$server" "${common[@]}" --discard-unreadable-state \
  >"$work/stdout" 2>"$work/stderr" &
pid=$!
for _ in $(seq 100); do
  [[ -s "$work/port" ]] && break
  kill -0 "$pid" 2>/dev/null || fail "the server exited"
  sleep 0.1
done
[[ -s "$work/port" ]] || fail "the server did not listen within 10 s"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[[ $rc -eq 0 ]] || fail "exit code $rc after SIGTERM, expected 0"
moved=("$dir"/discarded-*/checkpoint-000000000001.gwck)
[[ -f "${moved[0]}" ]] || fail "the checkpoint is not under discarded-*/"
grep -q "moved $checkpoint to ${moved[0]}" "$work/stderr" ||
  fail "the move was not logged"
[[ ! -e "$checkpoint" ]] || fail "the checkpoint is still in place"
echo "PASS"
