#!/usr/bin/env bash
# Dense fp32 against Top-K 1% + EF on a shaped network: two shards and two
# workers on separate network hosts (tests/cluster/netns.sh, through
# bench/common/shaped_links.sh) joined by
# links of --rate, training the Fashion-MNIST CNN for --steps steps each
# way; and, as the reference, the same two workers' steps with nothing on
# the network (--compute-only: local SGD, no shards). Prints seconds and
# bytes per step, the speed-up and each row's overhead over compute, and
# writes JSON.
#
#   bench/network/network.sh [--rate 10mbit|100mbit|1gbit|10gbit]
#       [--steps N] [--model cnn|mlp] [--bin DIR] [--json FILE] [--no-dense]
#
# --no-dense skips the dense row (hundreds of steps of it take long on slow
# links); its fields and the ratios against it are then null.
# Dense: --compressor=none --value-type=fp32 --pull=dense. Top-K: the
# `make demo` setting (--compressor=topk --ratio=0.01, error feedback, delta
# pulls at the push's ratio with fp16 values, pull ahead: the defaults), and
# again with --pull-ahead=false and with --overlap=false. Compute: both
# workers at once, as in the other rows, each on its part of the data.
# Seconds per step are the slower worker's training wall time over its
# steps (no evaluation); bytes per step are what both workers pushed and
# pulled, over the steps. Every worker gets OMP_NUM_THREADS = cores / 2,
# as gradwire local sets it: two workers with a thread per core each would
# oversubscribe the cores (OpenBLAS's threads spin). Needs root (network
# namespaces).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/common/shaped_links.sh
source "$here/../common/shaped_links.sh"

BIN=build/bin
rate=1gbit
steps=40
dense=1
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
    --no-dense) dense=0; shift ;;
    *) echo "network.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "--steps: '$steps' is not a positive integer" >&2; exit 2; }
[[ "$model" == cnn || "$model" == mlp ]] || { echo "--model: '$model' is not cnn or mlp" >&2; exit 2; }
BIN=$(cd "$BIN" && pwd)
cores=$(nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$((cores / 2 > 0 ? cores / 2 : 1))}

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
  # Where the slower worker's step time went (its summary's phases).
  awk -v n="$steps" '
    function field(key,   v) {
      if (!match($0, "\"" key "\": [0-9.]+")) return 0
      v = substr($0, RSTART, RLENGTH); sub(/.*: /, "", v); return v
    }
    /"wall_seconds"/ && field("wall_seconds") >= wall {
      wall = field("wall_seconds")
      line = sprintf("  per step: compress %.1f ms, push %.1f ms, pull %.1f ms (waited for %.1f ms)",
        1000 * field("compress_seconds") / n, 1000 * field("push_seconds") / n,
        1000 * field("pull_seconds") / n, 1000 * field("pull_wait_seconds") / n)
    }
    END { print line }' "$dir"/worker-*.json >&2
}

# compute: the same workers' steps without shards or network; sets
# compute_seconds.
compute() {
  local dir="$work/compute"
  echo "=== compute only (no shards, no network), $steps steps of the $model" >&2
  shaped_compute_only "$dir" --evaluate=false --model="$model" \
    --max-steps="$steps" --epochs=1
  compute_seconds=$(awk -v n="$steps" '
    /"wall_seconds"/ {
      match($0, /"wall_seconds": [0-9.]+/); w = substr($0, RSTART + 16, RLENGTH - 16)
      if (w > wall) wall = w
    }
    END { printf "%.4f\n", wall / n }' "$dir"/worker-*.json)
  echo "compute: $compute_seconds s/step" >&2
}

compute
if [[ $dense == 1 ]]; then
  run dense --compressor=none --value-type=fp32 --pull=dense
  dense_seconds=$seconds_per_step
  dense_bytes=$bytes_per_step
else
  # Not run: the JSON says null, the ratios against it too.
  dense_seconds=null
  dense_bytes=null
fi
run topk --compressor=topk --ratio=0.01 --error-feedback --pull=delta
topk_seconds=$seconds_per_step
topk_bytes=$bytes_per_step
# The same without pull ahead: every pull after the step's last push, and
# the next forward pass after every pull.
run topk-pull-after --compressor=topk --ratio=0.01 --error-feedback \
  --pull=delta --pull-ahead=false
pull_after_seconds=$seconds_per_step
# The same without overlap: every chunk compressed and pushed after
# backward(), then pulled, one request per shard each way.
run topk-sequential --compressor=topk --ratio=0.01 --error-feedback \
  --pull=delta --overlap=false
sequential_seconds=$seconds_per_step

ratio() { [[ $1 == null ]] && { echo null; return; }; awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { printf f, a / b }'; }
speedup=$(ratio "$dense_seconds" "$topk_seconds" "%.2f")
byte_ratio=$(ratio "$dense_bytes" "$topk_bytes" "%.1f")
overhead() { ratio "$1" "$compute_seconds" "%.3f"; }
dense_overhead=$(overhead "$dense_seconds")
topk_overhead=$(overhead "$topk_seconds")
pull_after_overhead=$(overhead "$pull_after_seconds")
sequential_overhead=$(overhead "$sequential_seconds")
delay="none"
[[ $NETNS_HAVE_NETEM == 1 ]] && delay=$NETNS_DELAY
mkdir -p "$(dirname "$json")"
printf '{"link": "%s", "added_delay": "%s", "model": "%s", "steps": %s, "compute_seconds_per_step": %s, "dense_seconds_per_step": %s, "topk_seconds_per_step": %s, "topk_pull_after_seconds_per_step": %s, "topk_sequential_seconds_per_step": %s, "dense_vs_compute": %s, "topk_vs_compute": %s, "topk_pull_after_vs_compute": %s, "topk_sequential_vs_compute": %s, "speedup": %s, "dense_bytes_per_step": %s, "topk_bytes_per_step": %s, "bytes_ratio": %s}\n' \
  "$rate" "$delay" "$model" "$steps" "$compute_seconds" "$dense_seconds" \
  "$topk_seconds" "$pull_after_seconds" "$sequential_seconds" \
  "$dense_overhead" "$topk_overhead" "$pull_after_overhead" \
  "$sequential_overhead" "$speedup" "$dense_bytes" "$topk_bytes" \
  "$byte_ratio" >"$json"
echo
echo "link $rate (added delay: $delay), $model, 2 shards + 2 workers, $steps steps:"
printf '  %-22s %10s s/step %14s bytes/step\n' "compute only" "$compute_seconds" 0
if [[ $dense == 1 ]]; then
  printf '  %-22s %10s s/step %14s bytes/step %7sx compute\n' "dense fp32" "$dense_seconds" "$dense_bytes" "$dense_overhead"
else
  printf '  %-22s %10s\n' "dense fp32" "not run (--no-dense)"
fi
printf '  %-22s %10s s/step %14s bytes/step %7sx compute\n' "Top-K 1% + EF" "$topk_seconds" "$topk_bytes" "$topk_overhead"
printf '  %-22s %10s s/step %14s %17sx compute\n' "  without pull ahead" "$pull_after_seconds" "" "$pull_after_overhead"
printf '  %-22s %10s s/step %14s %17sx compute\n' "  without overlap" "$sequential_seconds" "" "$sequential_overhead"
if [[ $dense == 1 ]]; then
  echo "  speed-up ${speedup}x, ${byte_ratio}x fewer bytes; wrote $json"
else
  echo "  wrote $json"
fi
