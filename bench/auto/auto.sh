#!/usr/bin/env bash
# The shaped-link matrix: every compression setting and PyTorch DDP on
# every link, the Fashion-MNIST CNN with 2 workers (and 2 shards for
# gradwire), on separate network hosts joined by shaped links as
# bench/network/network.sh builds them (bench/common/shaped_links.sh).
#
#   bench/auto/auto.sh [--model=cnn] [--links=10mbit,100mbit,1gbit,unshaped]
#       [--configs=compute,dense,fp16,topk1,topk01,auto,ddp,ddp-fp16,
#                  ddp-psgd1,ddp-psgd2,ddp-psgd4,ddp-bpsgd4]
#       [--steps=30] [--slow-steps=10] [--test-limit=0] [--bin=DIR]
#       [--json=FILE]
#   bench/auto/auto.sh --convergence [--seeds=1,2,3] [--bin=DIR] [--json=FILE]
#   bench/auto/auto.sh --model=resnet18|gpt [--links=...]
#       [--configs=compute,ddp,ddp-fp16,ddp-psgd4,gradwire,gradwire-psgd4,
#                  gradwire-auto (and ddp-psgd1, ddp-psgd2)]
#       [--steps=300|200] [--slow-steps=10] [--eval-every=50|25]
#       [--test-limit=1000] [--target=VALUE] [--script-args="FLAGS"]
#       [--bin=DIR] [--json=FILE]
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
# --model=resnet18 or gpt (default cnn: all of the above) runs the user's
# scripts of examples/python/ (resnet, gpt) on the same hosts and links:
# compute (two copies of original.py at once, each one worker with no
# exchange), ddp (original.py as 2 DDP ranks over gloo), ddp-fp16 and
# ddp-psgd1/2/4 (the same with PyTorch's fp16 or PowerSGD hook,
# bench/models/ddp_hooked.py) and gradwire, gradwire-psgd4, gradwire-auto
# (train.py under `gradwire run` on each worker host, joining the 2
# shards: the default compression, GRADWIRE_COMPRESSION=powersgd,rank=4 and
# =auto). Every rank runs through bench/auto/periodic_eval.py: each
# --eval-every steps the script's own evaluation (--test-limit test images
# for ResNet-18, 0: all; the held-out windows for the GPT), taken off the
# clock. DDP dense and fp16 train --slow-steps at 10mbit. The table per
# link adds the metric, the fastest DDP peer and gradwire's ratio to it,
# and time to the target: the first evaluation at or past --target
# (default: the worst final value of the DDP dense rows that ran every
# step), from launch, evaluations left out (bench/auto/model_report.py).
# JSON: docs/benchmarks/data/auto-MODEL-DATE.json, with the commit.
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
# shellcheck source=bench/auto/model_rows.sh
source "$HERE/model_rows.sh"

# The header comment, from its second line to the end of the paragraph on
# --model's output.
usage() {
  sed -n '2,/auto-MODEL-DATE/p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}
bad() { echo "auto.sh: $*" >&2; exit 2; }

command_line="bench/auto/auto.sh $*"
BIN=$root/build/bin
PYTHON=${PYTHON:-/usr/bin/python3}
links=10mbit,100mbit,1gbit,unshaped
model=cnn
configs=""
steps=""
slow_steps=10
test_limit=""
eval_every=""
target=""
script_args=""
seeds=1,2,3
convergence=0
json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model=*) model=${1#*=} ;;
    --links=*) links=${1#*=} ;;
    --configs=*) configs=${1#*=} convergence_configs=${1#*=} ;;
    --steps=*) steps=${1#*=} ;;
    --slow-steps=*) slow_steps=${1#*=} ;;
    --test-limit=*) test_limit=${1#*=} ;;
    --eval-every=*) eval_every=${1#*=} ;;
    --target=*) target=${1#*=} ;;
    --script-args=*) script_args=${1#*=} ;;
    --seeds=*) seeds=${1#*=} ;;
    --bin=*) BIN=${1#*=} ;;
    --json=*) json=${1#*=} ;;
    --convergence) convergence=1 ;;
    -h | --help) usage 0 ;;
    *) bad "unknown argument '$1' (options take --name=value; see --help)" ;;
  esac
  shift
done

# Each model's defaults and rows: the CNN's are rows.sh's, the real
# models' model_rows.sh's.
case "$model" in
  cnn)
    known_configs=$AUTO_CONFIGS
    configs=${configs:-${AUTO_CONFIGS// /,}}
    steps=${steps:-30}
    test_limit=${test_limit:-0}
    ;;
  resnet18 | gpt)
    [[ $convergence == 0 ]] || bad "--convergence is the CNN's (no --model)"
    known_configs=$MODEL_CONFIGS
    configs=${configs:-${MODEL_DEFAULT_CONFIGS// /,}}
    if [[ $model == resnet18 ]]; then
      steps=${steps:-300} eval_every=${eval_every:-50}
      test_limit=${test_limit:-1000}
    else
      steps=${steps:-200} eval_every=${eval_every:-25}
      [[ -z $test_limit ]] || bad "--test-limit: the GPT evaluates held-out windows (--script-args=--eval-batches=N)"
      test_limit=0
    fi
    ;;
  *) bad "--model: '$model' is not cnn, resnet18 or gpt" ;;
esac
[[ $model != cnn || -z $eval_every$target$script_args ]] ||
  bad "--eval-every, --target and --script-args are for --model=resnet18|gpt"
positive() { [[ $2 =~ ^[1-9][0-9]*$ ]] || bad "--$1: '$2' is not a positive integer"; }
positive steps "$steps"
positive slow-steps "$slow_steps"
[[ $test_limit =~ ^[0-9]+$ ]] || bad "--test-limit: '$test_limit' is not a non-negative integer"
[[ -z $eval_every || $eval_every =~ ^[0-9]+$ ]] || bad "--eval-every: '$eval_every' is not a non-negative integer"
[[ -z $target || $target =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "--target: '$target' is not a number"
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
  [[ " $known_configs " == *" $config "* ]] ||
    bad "--configs: '$config' is not one of ${known_configs// /, }"
done
[[ -d $BIN ]] || bad "--bin: '$BIN' is not a directory"
BIN=$(cd "$BIN" && pwd)
binaries=(gradwire-server gradwire-worker gradwire)
[[ $model == cnn ]] || binaries=(gradwire-server gradwire)
for binary in "${binaries[@]}"; do
  [[ -x "$BIN/$binary" ]] || bad "--bin: $BIN/$binary is missing (make build)"
done
date=$(date -u +%Y-%m-%d)
if [[ -z $json ]]; then
  json=$root/docs/benchmarks/data/auto-$date.json
  [[ $convergence == 0 ]] || json=$root/docs/benchmarks/data/auto-convergence-$date.json
  [[ $model == cnn ]] || json=$root/docs/benchmarks/data/auto-$model-$date.json
fi
export PYTHONPATH=${PYTHONPATH:-$(dirname "$BIN")/python}
cores=$(nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$((cores / 2 > 0 ? cores / 2 : 1))}
MODEL_FLAGS=(--model=cnn --test-limit="$test_limit")
# The real models' scripts: their folder and the flags of every row.
MODEL_DIR=$root/examples/python/${model%18}
read -r -a MODEL_SCRIPT_FLAGS <<<"--seed=1 $script_args"
if [[ $model == resnet18 ]]; then
  limit=$test_limit
  [[ $limit != 0 ]] || limit=-1 # original.py's "all"
  MODEL_SCRIPT_FLAGS+=(--test-limit="$limit")
fi
EVAL_EVERY=${eval_every:-0}

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

# The real model's matrix: compute once, then every config on every link;
# DDP dense and fp16 at 10mbit take --slow-steps.
model_matrix() {
  PLANNED_STEPS=$steps
  local link config n
  if [[ " ${config_list[*]} " == *" compute "* ]]; then
    model_row none compute "$steps"
  fi
  for link in "${link_list[@]}"; do
    for config in "${config_list[@]}"; do
      [[ $config == compute ]] && continue
      n=$steps
      if [[ $link == 10mbit && ($config == ddp || $config == ddp-fp16) ]]; then
        n=$((slow_steps < steps ? slow_steps : steps))
      fi
      model_row "$link" "$config" "$n"
    done
  done
  echo
  echo "$model, 2 workers (2 shards for gradwire), OMP_NUM_THREADS=$OMP_NUM_THREADS on $cores cores; $steps steps a row ($slow_steps for DDP dense and fp16 at 10mbit), evaluated every $EVAL_EVERY"
  "$PYTHON" "$HERE/auto_report.py" model-report --json="$json" \
    --command="$command_line" --model="$model" --steps="$steps" \
    --slow-steps="$slow_steps" --eval-every="$EVAL_EVERY" \
    ${target:+--target="$target"} "$ROWS"
}

if [[ $convergence == 1 ]]; then
  convergence_runs
elif [[ $model == cnn ]]; then
  matrix
else
  model_matrix
fi
echo "took $(( ($(date +%s) - started + 30) / 60 )) min"
