#!/usr/bin/env bash
# The docker-compose topology run for real on separate network hosts: two
# shards and two workers, each in its own network namespace behind a shaped
# link to a bridge, train briefly. Two cases:
#
#   shaped    per rate profile: checks accuracy and bytes, that every
#             process exits cleanly, and that every namespace is gone.
#   cut-link  at 1 Gbit/s, worker 1's link goes down for CUT_SECONDS (5)
#             while training runs and comes back: training stalls (BSP
#             waits for worker 1), resumes, and ends with every step done,
#             the expected accuracy and identical weights on both workers.
#
#   tests/cluster/cluster_test.sh [--bin DIR] [--rate 1gbit|10gbit]...
#                                 [--case shaped|cut-link]...
#
# Exit: 0 passed, 1 failed, 77 skipped (not root, or no namespaces here).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/netns.sh
source "$here/netns.sh"
# shellcheck source=tests/cluster/topology.sh
source "$here/topology.sh"

BIN=build/bin
rates=()
cases=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --bin=*) BIN=${1#*=}; shift ;;
    --rate) rates+=("$2"); shift 2 ;;
    --rate=*) rates+=("${1#*=}"); shift ;;
    --case) cases+=("$2"); shift 2 ;;
    --case=*) cases+=("${1#*=}"); shift ;;
    *) echo "cluster_test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ ${#rates[@]} -gt 0 ]] || rates=(1gbit 10gbit)
[[ ${#cases[@]} -gt 0 ]] || cases=(shaped cut-link)
for c in "${cases[@]}"; do
  case "$c" in
    shaped|cut-link) ;;
    *) echo "cluster_test.sh: --case '$c' is not shaped or cut-link" >&2; exit 2 ;;
  esac
done
BIN=$(cd "$BIN" && pwd)
for b in gradwire-server gradwire-worker gradwire; do
  [[ -x "$BIN/$b" ]] || { echo "cluster_test.sh: $BIN/$b is missing" >&2; exit 1; }
done

netns_require
topology_work_dir
work=$TOPOLOGY_WORK

TRAIN_FLAGS=(--model=mlp --train-limit=8000 --test-limit=2000
  --compressor=topk --ratio=0.01)

# Both workers ran $2 steps; worker 0's test accuracy is above 0.5.
check_steps_and_accuracy() {
  local dir=$1 want=$2 label=$3 i steps accuracy
  for i in 0 1; do
    steps=$(json_value "$dir/worker-$i.json" steps)
    [[ "$steps" == "$want" ]] || topology_fail "$label: worker $i ran '$steps' steps, not $want"
  done
  accuracy=$(json_value "$dir/worker-0.json" test_accuracy)
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.5) }' ||
    topology_fail "$label: test accuracy $accuracy is not above 0.5 (chance: 0.1)"
}

shaped_case() {
  local rate=$1 dir="$work/$1"
  echo "=== shaped: $rate"
  mkdir -p "$dir"
  topology_up "$rate" 2 2 "$dir"
  topology_train "$dir" "${TRAIN_FLAGS[@]}" --max-steps=60 --epochs=2
  topology_down

  check_steps_and_accuracy "$dir" 60 "$rate"
  local summary="$dir/worker-0.json" accuracy pushed dense
  accuracy=$(json_value "$summary" test_accuracy)
  pushed=$(json_value "$summary" pushed_bytes)
  dense=$(json_value "$summary" dense_equivalent_bytes)
  awk -v p="$pushed" -v d="$dense" 'BEGIN { exit !(p > 0 && d / p > 50) }' ||
    topology_fail "$rate: pushed $pushed bytes against $dense dense: not 50x less"
  echo "$rate: accuracy $accuracy after 60 steps, worker 0 pushed $pushed bytes" \
       "(dense fp32: $dense); every process exited 0, no namespace left"
}

# The cut lasts longer than a step (~0.1 s here) and than the client's
# longest retry backoff (2 s), and less than the deadlines of a Push (the
# default --rpc-timeout-seconds=30) and of a Pull (300 s).
CUT_SECONDS=5
CUT_STEPS=200
CUT_AFTER_STEPS=20
METRICS_PORT=9401

# Worker 0's step counter (gradwire_worker_steps_total), read in its
# namespace, which the cut does not touch.
worker0_steps() { topology_metric worker0 "$METRICS_PORT" gradwire_worker_steps_total; }

cut_link_case() {
  local dir="$work/cut-link"
  echo "=== cut-link: worker 1 offline for $CUT_SECONDS s during training"
  mkdir -p "$dir"
  topology_up 1gbit 2 2 "$dir"
  # Default client settings: what a user runs.
  (topology_train "$dir" "${TRAIN_FLAGS[@]}" --max-steps="$CUT_STEPS" --epochs=4 \
     --metrics-port="$METRICS_PORT") &
  local train=$! steps="" _
  for _ in $(seq 1 300); do
    steps=$(worker0_steps)
    [[ -n "$steps" && "$steps" -ge $CUT_AFTER_STEPS ]] && break
    kill -0 "$train" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$steps" && "$steps" -ge $CUT_AFTER_STEPS ]] ||
    topology_fail "cut-link: worker 0 did not reach step $CUT_AFTER_STEPS within 30 s (at '${steps}')"

  netns_link_down worker1
  # Steps in flight when the link went down may still finish: the stall is
  # measured from one second into the cut.
  sleep 1
  local cut_at at_restore
  cut_at=$(worker0_steps)
  sleep $((CUT_SECONDS - 1))
  at_restore=$(worker0_steps)
  netns_link_up worker1
  local restored=$SECONDS resumed=""
  for _ in $(seq 1 200); do
    steps=$(worker0_steps)
    if [[ -z "$steps" || "$steps" -gt $((at_restore + 1)) ]]; then
      resumed=$((SECONDS - restored))
      break
    fi
    sleep 0.1
  done
  # BSP: without worker 1's pushes worker 0 cannot finish a step; at full
  # pace it would have done ~50 in these 4 s.
  [[ -n "$cut_at" && -n "$at_restore" && $((at_restore - cut_at)) -le 1 ]] ||
    topology_fail "cut-link: worker 0 went from step '${cut_at}' to '${at_restore}' (empty: no" \
      "answer, training over) while worker 1 was cut off: the cut did not take"
  [[ -n "$resumed" ]] ||
    topology_fail "cut-link: training did not resume within 20 s of the link coming back (step ${steps})"
  wait "$train" || topology_fail "cut-link: training failed after the cut (see the logs)"
  topology_down

  check_steps_and_accuracy "$dir" "$CUT_STEPS" cut-link
  local f0 f1 retries accuracy
  f0=$(json_value "$dir/worker-0.json" weights_fingerprint)
  f1=$(json_value "$dir/worker-1.json" weights_fingerprint)
  [[ -n "$f0" && "$f0" == "$f1" ]] ||
    topology_fail "cut-link: the workers' final weights differ ($f0 against $f1)"
  retries=$(json_value "$dir/worker-1.json" retries)
  accuracy=$(json_value "$dir/worker-0.json" test_accuracy)
  echo "cut-link: worker 0 at step $cut_at 1 s into the cut, at step $at_restore" \
       "when the link came back, resumed within ${resumed} s; $CUT_STEPS steps, accuracy $accuracy," \
       "identical weights; worker 1's RPC retries: $retries"
}

for c in "${cases[@]}"; do
  case "$c" in
    shaped) for rate in "${rates[@]}"; do shaped_case "$rate"; done ;;
    cut-link) cut_link_case ;;
  esac
done
echo "PASSED: ${cases[*]}"
