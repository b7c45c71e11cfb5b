#!/usr/bin/env bash
# Dense fp32 against Top-K 1% + EF on a shaped network: two shards and two
# workers on separate network hosts (tests/cluster/netns.sh) joined by
# links of --rate, training the Fashion-MNIST CNN for --steps steps each
# way. Prints seconds and bytes per step and the speed-up, and writes JSON.
#
#   bench/network.sh [--rate 1gbit|10gbit|100mbit] [--steps N] [--model cnn|mlp]
#                    [--bin DIR] [--json FILE]
#
# Dense: --compressor=none --value-type=fp32 --pull=dense. Top-K: the
# `make demo` setting (--compressor=topk --ratio=0.01, error feedback, delta
# pulls at 5%). Seconds per step are the slower worker's training wall time
# over its steps (no evaluation); bytes per step are what both workers
# pushed and pulled, over the steps. Needs root (network namespaces).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/netns.sh
source "$here/../tests/cluster/netns.sh"
# shellcheck source=tests/cluster/topology.sh
source "$here/../tests/cluster/topology.sh"

BIN=build/bin
rate=1gbit
steps=40
model=cnn
json=build/bench-network.json
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --bin=*) BIN=${1#*=}; shift ;;
    --rate) rate=$2; shift 2 ;;
    --rate=*) rate=${1#*=}; shift ;;
    --steps) steps=$2; shift 2 ;;
    --steps=*) steps=${1#*=}; shift ;;
    --model) model=$2; shift 2 ;;
    --model=*) model=${1#*=}; shift ;;
    --json) json=$2; shift 2 ;;
    --json=*) json=${1#*=}; shift ;;
    *) echo "network.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "--steps: '$steps' is not a positive integer" >&2; exit 2; }
[[ "$model" == cnn || "$model" == mlp ]] || { echo "--model: '$model' is not cnn or mlp" >&2; exit 2; }
BIN=$(cd "$BIN" && pwd)

netns_require
topology_work_dir
work=$TOPOLOGY_WORK

# run NAME FLAGS...: one training on a fresh topology; sets seconds_per_step
# and bytes_per_step.
run() {
  local name=$1
  shift
  local dir="$work/$name"
  mkdir -p "$dir"
  echo "=== $name on $rate links, $steps steps of the $model" >&2
  topology_up "$rate" 2 2 "$dir"
  topology_train "$dir" --model="$model" --max-steps="$steps" --epochs=1 \
    --evaluate=false "$@"
  topology_down
  read -r seconds_per_step bytes_per_step < <(
    awk -v n="$steps" '
      FNR == 1 { file++ }
      /"wall_seconds"/ {
        match($0, /"wall_seconds": [0-9.]+/); w = substr($0, RSTART + 16, RLENGTH - 16)
        if (w > wall) wall = w
        match($0, /"pushed_bytes": [0-9]+/); bytes += substr($0, RSTART + 16, RLENGTH - 16)
        match($0, /"pulled_bytes": [0-9]+/); bytes += substr($0, RSTART + 16, RLENGTH - 16)
      }
      END { printf "%.4f %.0f\n", wall / n, bytes / n }' "$dir"/worker-*.json)
  echo "$name: $seconds_per_step s/step, $bytes_per_step bytes/step" >&2
}

run dense --compressor=none --value-type=fp32 --pull=dense
dense_seconds=$seconds_per_step
dense_bytes=$bytes_per_step
run topk --compressor=topk --ratio=0.01 --error-feedback --pull=delta --pull-ratio=0.05
topk_seconds=$seconds_per_step
topk_bytes=$bytes_per_step

speedup=$(awk -v d="$dense_seconds" -v t="$topk_seconds" 'BEGIN { printf "%.2f", d / t }')
byte_ratio=$(awk -v d="$dense_bytes" -v t="$topk_bytes" 'BEGIN { printf "%.1f", d / t }')
delay="none"
[[ $NETNS_HAVE_NETEM == 1 ]] && delay=$NETNS_DELAY
mkdir -p "$(dirname "$json")"
printf '{"link": "%s", "added_delay": "%s", "model": "%s", "steps": %s, "dense_seconds_per_step": %s, "topk_seconds_per_step": %s, "speedup": %s, "dense_bytes_per_step": %s, "topk_bytes_per_step": %s, "bytes_ratio": %s}\n' \
  "$rate" "$delay" "$model" "$steps" "$dense_seconds" "$topk_seconds" "$speedup" \
  "$dense_bytes" "$topk_bytes" "$byte_ratio" >"$json"
echo
echo "link $rate (added delay: $delay), $model, 2 shards + 2 workers, $steps steps:"
printf '  %-22s %10s s/step %14s bytes/step\n' "dense fp32" "$dense_seconds" "$dense_bytes"
printf '  %-22s %10s s/step %14s bytes/step\n' "Top-K 1% + EF" "$topk_seconds" "$topk_bytes"
echo "  speed-up ${speedup}x, ${byte_ratio}x fewer bytes; wrote $json"
