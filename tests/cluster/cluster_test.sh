#!/usr/bin/env bash
# The docker-compose topology run for real on separate network hosts: two
# shards and two workers, each in its own network namespace behind a shaped
# link to a bridge, train briefly; the test checks accuracy and bytes, that
# every process exits cleanly, and that every namespace is gone afterwards.
#
#   tests/cluster/cluster_test.sh [--bin DIR] [--rate 1gbit|10gbit]...
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
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --bin=*) BIN=${1#*=}; shift ;;
    --rate) rates+=("$2"); shift 2 ;;
    --rate=*) rates+=("${1#*=}"); shift ;;
    *) echo "cluster_test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ ${#rates[@]} -gt 0 ]] || rates=(1gbit 10gbit)
BIN=$(cd "$BIN" && pwd)
for b in gradwire-server gradwire-worker gradwire; do
  [[ -x "$BIN/$b" ]] || { echo "cluster_test.sh: $BIN/$b is missing" >&2; exit 1; }
done

netns_require
topology_work_dir
work=$TOPOLOGY_WORK

for rate in "${rates[@]}"; do
  echo "=== $rate"
  dir="$work/$rate"
  mkdir -p "$dir"
  topology_up "$rate" 2 2 "$dir"
  topology_train "$dir" --model=mlp --max-steps=60 --epochs=2 \
    --train-limit=8000 --test-limit=2000 --compressor=topk --ratio=0.01
  topology_down

  summary="$dir/worker-0.json"
  accuracy=$(json_value "$summary" test_accuracy)
  pushed=$(json_value "$summary" pushed_bytes)
  dense=$(json_value "$summary" dense_equivalent_bytes)
  for i in 0 1; do
    steps=$(json_value "$dir/worker-$i.json" steps)
    [[ "$steps" == 60 ]] || topology_fail "$rate: worker $i ran '$steps' steps, not 60"
  done
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.5) }' ||
    topology_fail "$rate: test accuracy $accuracy is not above 0.5 (chance: 0.1)"
  awk -v p="$pushed" -v d="$dense" 'BEGIN { exit !(p > 0 && d / p > 50) }' ||
    topology_fail "$rate: pushed $pushed bytes against $dense dense: not 50x less"
  echo "$rate: accuracy $accuracy after 60 steps, worker 0 pushed $pushed bytes" \
       "(dense fp32: $dense); every process exited 0, no namespace left"
done
echo "PASSED: ${rates[*]}"
