#!/usr/bin/env bash
# The shaped-link matrix: every compression setting and PyTorch DDP on
# every link, the Fashion-MNIST CNN with 2 workers (and 2 shards for
# gradwire), on separate network hosts joined by shaped links as
# bench/network/network.sh builds them (bench/common/shaped_links.sh).
#
#   bench/auto/auto.sh [--links=10mbit,100mbit,1gbit,unshaped]
#       [--configs=compute,dense,fp16,topk1,topk01,auto,ddp,ddp-fp16,
#                  ddp-psgd1,ddp-psgd2,ddp-psgd4,ddp-bpsgd4]
#       [--steps=30] [--slow-steps=10] [--test-limit=0] [--bin=DIR]
#       [--json=FILE]
#   bench/auto/auto.sh --convergence [--seeds=1,2,3] [--bin=DIR] [--json=FILE]
#
# Rows (configs): compute (both workers' steps alone, --compute-only: no
# shards, nothing on the network; run once, not per link), dense
# (--compressor=none, fp32, dense pulls), fp16 (--compressor=fp16), topk1 /
# topk01 (Top-K 1% / 0.1% + error feedback, delta pulls), auto
# (--compressor=auto; "not available" where gradwire-worker refuses it),
# ddp and ddp-fp16 (bench/python/worker.py's --baseline=ddp, gloo, run by
# bench/auto/ddp_link.py, and the same with PyTorch's fp16 compression
# hook: bench/auto/ddp_fp16.py), ddp-psgd1 / ddp-psgd2 / ddp-psgd4 (the
# same with PyTorch's PowerSGD hook, rank 1 / 2 / 4, error feedback and
# warm start, dense all-reduce in the first 2 steps:
# bench/auto/ddp_powersgd.py) and ddp-bpsgd4 (its batched hook, rank 4).
# Links: 10mbit, 100mbit, 1gbit (tc tbf, with netem delay where the kernel
# has it) and unshaped (the same hosts, no qdisc).
#
# Each row trains --steps steps (--slow-steps for dense and DDP dense on
# 10mbit links, several seconds a step there; the table marks them with *
# and the JSON with reduced_steps), then worker 0 evaluates on the test set
# (--test-limit examples; 0: all). The table: seconds per step, against
# compute only, payload bytes per step, wire bytes per step where the
# workers' summaries count them, link bytes per step (both worker hosts'
# interface counters: DDP rows from the end of start-up to the last step,
# gradwire rows the whole run less start-up's payload), test accuracy and
# start-up seconds (bench/auto/auto_report.py defines each). JSON: the
# machine, the command and every row, by default
# docs/benchmarks/data/auto-DATE.json.
#
# --convergence trains one CNN epoch for each seed of --seeds: auto on
# 100mbit and 10mbit links, dense fp32 and Top-K 1% + EF unshaped (their
# accuracy does not depend on the link: Top-K 1% is the fixed setting auto
# starts from and the fastest on most links); --configs picks among dense,
# topk1 and auto (default: all three). It prints the Markdown table of
# docs/convergence.md and writes
# docs/benchmarks/data/auto-convergence-DATE.json.
#
# Every process gets OMP_NUM_THREADS = cores / 2, as network.sh. Needs root
# (network namespaces; exits 77 without). Exit 0 when the matrix ran (rows
# that failed or are not available say so), 2 for a bad argument.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$HERE/../.." && pwd)
# shellcheck source=bench/common/shaped_links.sh
source "$root/bench/common/shaped_links.sh"
# shellcheck source=bench/auto/rows.sh
source "$HERE/rows.sh"

# The header comment, from its second line to the end of the paragraph on
# --convergence's output.
usage() {
  sed -n '2,/auto-convergence-DATE/p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}
bad() { echo "auto.sh: $*" >&2; exit 2; }

command_line="bench/auto/auto.sh $*"
BIN=$root/build/bin
PYTHON=${PYTHON:-/usr/bin/python3}
links=10mbit,100mbit,1gbit,unshaped
configs=${AUTO_CONFIGS// /,}
steps=30
slow_steps=10
test_limit=0
seeds=1,2,3
convergence=0
json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --links=*) links=${1#*=} ;;
    --configs=*) configs=${1#*=} convergence_configs=${1#*=} ;;
    --steps=*) steps=${1#*=} ;;
    --slow-steps=*) slow_steps=${1#*=} ;;
    --test-limit=*) test_limit=${1#*=} ;;
    --seeds=*) seeds=${1#*=} ;;
    --bin=*) BIN=${1#*=} ;;
    --json=*) json=${1#*=} ;;
    --convergence) convergence=1 ;;
    -h | --help) usage 0 ;;
    *) bad "unknown argument '$1' (options take --name=value; see --help)" ;;
  esac
  shift
done

positive() { [[ $2 =~ ^[1-9][0-9]*$ ]] || bad "--$1: '$2' is not a positive integer"; }
positive steps "$steps"
positive slow-steps "$slow_steps"
[[ $test_limit =~ ^[0-9]+$ ]] || bad "--test-limit: '$test_limit' is not a non-negative integer"
[[ $seeds =~ ^[0-9]+(,[0-9]+)*$ ]] || bad "--seeds: '$seeds' is not a comma-separated list of integers"
IFS=, read -r -a link_list <<<"$links"
IFS=, read -r -a config_list <<<"$configs"
[[ ${#link_list[@]} -gt 0 ]] || bad "--links: empty"
[[ ${#config_list[@]} -gt 0 ]] || bad "--configs: empty"
for link in "${link_list[@]}"; do
  if [[ $link == 10gbit ]] || ! shaped_link_known "$link"; then
    bad "--links: '$link' is not one of 10mbit, 100mbit, 1gbit, unshaped"
  fi
done
for config in "${config_list[@]}"; do
  [[ " $AUTO_CONFIGS " == *" $config "* ]] ||
    bad "--configs: '$config' is not one of ${AUTO_CONFIGS// /, }"
done
[[ -d $BIN ]] || bad "--bin: '$BIN' is not a directory"
BIN=$(cd "$BIN" && pwd)
for binary in gradwire-server gradwire-worker gradwire; do
  [[ -x "$BIN/$binary" ]] || bad "--bin: $BIN/$binary is missing (make build)"
done
date=$(date -u +%Y-%m-%d)
if [[ -z $json ]]; then
  json=$root/docs/benchmarks/data/auto-$date.json
  [[ $convergence == 0 ]] || json=$root/docs/benchmarks/data/auto-convergence-$date.json
fi
export PYTHONPATH=${PYTHONPATH:-$(dirname "$BIN")/python}
cores=$(nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$((cores / 2 > 0 ? cores / 2 : 1))}
MODEL_FLAGS=(--model=cnn --test-limit="$test_limit")

netns_require
WORK=$(mktemp -d)
ROWS=$WORK/rows.jsonl
finish() {
  local code=$?
  netns_cleanup
  rm -rf "$WORK"
  exit "$code"
}
trap finish EXIT
trap 'exit 130' INT TERM
started=$(date +%s)

# The matrix: compute once, then every config on every link.
matrix() {
  PLANNED_STEPS=$steps
  local link config n
  if [[ " ${config_list[*]} " == *" compute "* ]]; then
    run_row none compute "$steps"
  fi
  for link in "${link_list[@]}"; do
    for config in "${config_list[@]}"; do
      [[ $config == compute ]] && continue
      n=$steps
      if [[ $link == 10mbit && ($config == dense || $config == ddp) ]]; then
        n=$((slow_steps < steps ? slow_steps : steps))
      fi
      run_row "$link" "$config" "$n"
    done
  done
  echo
  echo "CNN, 2 workers, 2 shards, OMP_NUM_THREADS=$OMP_NUM_THREADS on $cores cores; $steps steps a row ($slow_steps for dense and DDP dense at 10mbit)"
  "$PYTHON" "$HERE/auto_report.py" report --json="$json" \
    --command="$command_line" --steps="$steps" --slow-steps="$slow_steps" \
    "$ROWS"
}

# Whether --convergence runs the rows of config $1 (--configs, when given,
# names them).
convergence_wanted() {
  [[ -z ${convergence_configs:-} || ",$convergence_configs," == *",$1,"* ]]
}

# One epoch per seed: auto on 100mbit and 10mbit, dense and Top-K 1%
# unshaped.
convergence_runs() {
  PLANNED_STEPS=0
  local seed
  IFS=, read -r -a seed_list <<<"$seeds"
  for seed in "${seed_list[@]}"; do
    convergence_wanted dense && run_row unshaped dense 0 "$seed"
    convergence_wanted topk1 && run_row unshaped topk1 0 "$seed"
    convergence_wanted auto && run_row 100mbit auto 0 "$seed"
    convergence_wanted auto && run_row 10mbit auto 0 "$seed"
  done
  echo
  echo "CNN, one epoch, 2 workers, 2 shards, OMP_NUM_THREADS=$OMP_NUM_THREADS on $cores cores; test accuracy of worker 0"
  "$PYTHON" "$HERE/auto_report.py" convergence --json="$json" \
    --command="$command_line" "$ROWS"
}

if [[ $convergence == 1 ]]; then
  convergence_runs
else
  matrix
fi
echo "took $(( ($(date +%s) - started + 30) / 60 )) min"
