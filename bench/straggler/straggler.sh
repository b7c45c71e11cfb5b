#!/usr/bin/env bash
# One straggler under BSP and SSP: 1 shard and 3 workers on this machine,
# worker 2 slowed on purpose (gradwire-worker --step-delay-ms, a
# fault-injection knob), trained for the same number of steps under BSP,
# SSP with staleness 2 and SSP with staleness 4, plus BSP without a
# straggler as the reference.
#
#   bench/straggler/straggler.sh [--bin DIR] [--steps N] [--delay-ms MS]
#       [--every N] [--json FILE] [-- extra worker flags]
#
# --every N slows only every N-th step of the straggler (an intermittent
# straggler); the default 1 slows every step. For each run it prints the
# fast workers' steps/s (mean of workers 0 and 1), the straggler's, the wall
# time of the whole run, how many steps the fast workers ran ahead of the
# slowest at most (max_step_lead in their summaries) and worker 0's final
# test accuracy. Defaults: build/bin, 60 steps, 150 ms, every step.
set -euo pipefail

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

bin=build/bin
steps=60
delay_ms=150
every=1
json=""
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --bin=*) bin="${1#*=}"; shift ;;
    --steps) steps="$2"; shift 2 ;;
    --steps=*) steps="${1#*=}"; shift ;;
    --delay-ms) delay_ms="$2"; shift 2 ;;
    --delay-ms=*) delay_ms="${1#*=}"; shift ;;
    --every) every="$2"; shift 2 ;;
    --every=*) every="${1#*=}"; shift ;;
    --json) json="$2"; shift 2 ;;
    --json=*) json="${1#*=}"; shift ;;
    -h|--help) usage 0 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "straggler.sh: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
for pair in "steps:$steps" "delay-ms:$delay_ms" "every:$every"; do
  [[ "${pair#*:}" =~ ^[1-9][0-9]*$ ]] ||
    { echo "straggler.sh: --${pair%%:*}: '${pair#*:}' is not a positive integer" >&2; exit 2; }
done
for binary in gradwire-server gradwire-worker; do
  [[ -x "$bin/$binary" ]] ||
    { echo "straggler.sh: $bin/$binary is missing; build it first" >&2; exit 1; }
done

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/gradwire-straggler.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$run_dir"
}
trap cleanup EXIT

# Enough examples for `steps` batches of 64 on each of 3 workers.
train_limit=$(( (steps + 2) * 64 * 3 ))

json_value() {
  sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p" "$1"
}

# run NAME DELAY_MS MODE_FLAGS...: one shard, three workers; appends a row
# to `rows`. Runs in this shell, so that the EXIT trap sees every pid.
run() {
  local name="$1" delay="$2"
  shift 2
  local dir="$run_dir/$name"
  mkdir -p "$dir"
  "$bin/gradwire-server" --port=0 --port-file="$dir/port" --num-workers=3 \
    --metrics-port=-1 >"$dir/server.out" 2>"$dir/server.err" &
  local server=$!
  pids+=("$server")
  for _ in $(seq 100); do [[ -s "$dir/port" ]] && break; sleep 0.1; done
  [[ -s "$dir/port" ]] || { echo "straggler.sh: $name: the shard did not start" >&2; cat "$dir/server.err" >&2; exit 1; }
  local port
  port=$(cat "$dir/port")
  local start workers=()
  start=$(date +%s.%N)
  for w in 0 1 2; do
    local slow=() evaluate=--evaluate=false
    [[ $w == 2 && $delay != 0 ]] && slow=(--step-delay-ms="$delay" --step-delay-every="$every")
    [[ $w == 0 ]] && evaluate=--evaluate=true
    "$bin/gradwire-worker" --shards="127.0.0.1:$port" --worker-id=$w \
      --num-workers=3 --model=mlp --max-steps="$steps" \
      --train-limit="$train_limit" --test-limit=2000 --progress=none \
      --metrics-port=-1 "$evaluate" "${slow[@]}" "$@" "${extra[@]}" \
      --summary-json="$dir/worker-$w.json" >"$dir/worker-$w.log" 2>&1 &
    workers+=($!)
    pids+=($!)
  done
  local w=0
  for pid in "${workers[@]}"; do
    if ! wait "$pid"; then
      echo "straggler.sh: $name: worker $w failed:" >&2
      tail -n 20 "$dir/worker-$w.log" >&2
      exit 1
    fi
    w=$((w + 1))
  done
  local end
  end=$(date +%s.%N)
  kill -TERM "$server"
  wait "$server" || true
  local f0="$dir/worker-0.json" f1="$dir/worker-1.json" f2="$dir/worker-2.json"
  rows+=("$(awk -v name="$name" -v wall="$(awk -v a="$start" -v b="$end" 'BEGIN{print b-a}')" \
      -v s0="$(json_value "$f0" steps_run)" -v t0="$(json_value "$f0" wall_seconds)" \
      -v s1="$(json_value "$f1" steps_run)" -v t1="$(json_value "$f1" wall_seconds)" \
      -v s2="$(json_value "$f2" steps_run)" -v t2="$(json_value "$f2" wall_seconds)" \
      -v l0="$(json_value "$f0" max_step_lead)" -v l1="$(json_value "$f1" max_step_lead)" \
      -v acc="$(json_value "$f0" test_accuracy)" 'BEGIN {
        fast = (s0 / t0 + s1 / t1) / 2; slow = s2 / t2;
        lead = (l0 > l1 ? l0 : l1);
        printf "%s|%.2f|%.2f|%.1f|%d|%.4f\n", name, fast, slow, wall, lead, acc }')")
  echo "  $name: done" >&2
}

if [[ $every == 1 ]]; then which="every step"; else which="every ${every}th step"; fi
echo "1 shard, 3 workers (MLP, $steps steps); worker 2 sleeps ${delay_ms} ms before $which" >&2
rows=()
run "BSP, no straggler" 0 --mode=bsp
run "BSP" "$delay_ms" --mode=bsp
run "SSP, staleness 2" "$delay_ms" --mode=ssp --staleness=2
run "SSP, staleness 4" "$delay_ms" --mode=ssp --staleness=4

echo "| run | fast workers steps/s | straggler steps/s | wall s | max step lead | test accuracy |"
echo "|---|---:|---:|---:|---:|---:|"
for row in "${rows[@]}"; do
  IFS='|' read -r name fast slow wall lead acc <<<"$row"
  echo "| $name | $fast | $slow | $wall | $lead | $acc |"
done

if [[ -n "$json" ]]; then
  {
    printf '{"steps": %s, "delay_ms": %s, "every": %s, "runs": [' "$steps" "$delay_ms" "$every"
    first=1
    for row in "${rows[@]}"; do
      IFS='|' read -r name fast slow wall lead acc <<<"$row"
      [[ $first == 1 ]] || printf ', '
      first=0
      printf '{"run": "%s", "fast_steps_per_second": %s, "straggler_steps_per_second": %s, "wall_seconds": %s, "max_step_lead": %s, "test_accuracy": %s}' \
        "$name" "$fast" "$slow" "$wall" "$lead" "$acc"
    done
    printf ']}\n'
  } >"$json"
  echo "wrote $json" >&2
fi
