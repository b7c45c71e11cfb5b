# shellcheck shell=bash
# The rows of bench/auto/auto.sh --model=resnet18|gpt: the user's scripts
# of examples/python/ (original.py under DDP, train.py under gradwire run)
# on the shaped links, each run through bench/auto/periodic_eval.py, which
# evaluates every EVAL_EVERY steps and reads the link's counters around
# the steps. Sourced by auto.sh after rows.sh; needs BIN, PYTHON, HERE,
# ROWS, WORK, MODEL_DIR (the script's folder), MODEL_SCRIPT_FLAGS (the
# flags every row's script gets) and EVAL_EVERY set.

# The configurations, in table order; MODEL_DEFAULT_CONFIGS without
# --configs.
# shellcheck disable=SC2034
MODEL_CONFIGS="compute ddp ddp-fp16 ddp-psgd1 ddp-psgd2 ddp-psgd4"
MODEL_CONFIGS+=" gradwire gradwire-psgd4 gradwire-auto"
# shellcheck disable=SC2034
MODEL_DEFAULT_CONFIGS="compute ddp ddp-fp16 ddp-psgd4 gradwire"
MODEL_DEFAULT_CONFIGS+=" gradwire-psgd4 gradwire-auto"

model_title() {
  case "$1" in
    compute) echo "compute only" ;;
    ddp) echo "DDP dense fp32" ;;
    ddp-fp16) echo "DDP fp16 hook" ;;
    ddp-psgd[124]) echo "DDP PowerSGD rank ${1#ddp-psgd}" ;;
    gradwire) echo "gradwire default" ;;
    gradwire-psgd4) echo "gradwire PowerSGD rank 4" ;;
    gradwire-auto) echo "gradwire auto" ;;
  esac
}

# The DDP hook of a configuration (bench/models/ddp_hooked.py --hook=),
# empty for DDP dense.
model_hook() {
  case "$1" in
    ddp-fp16) echo "fp16" ;;
    ddp-psgd[124]) echo "powersgd,rank=${1#ddp-psgd}" ;;
  esac
}

# GRADWIRE_COMPRESSION of a gradwire configuration; empty: unset, the
# default (Top-K 1% + EF, exact pulls, small tensors whole).
model_compression() {
  case "$1" in
    gradwire-psgd4) echo "powersgd,rank=4" ;;
    gradwire-auto) echo "auto" ;;
  esac
}

# Empty when this machine can run CONFIG; otherwise why not (one line).
model_unavailable() {
  case "$1" in
    gradwire*)
      "$PYTHON" -c 'import gradwire.torch' 2>/dev/null ||
        echo "$PYTHON cannot import gradwire.torch (PYTHONPATH=$PYTHONPATH)"
      ;;
    ddp-psgd*)
      "$PYTHON" -c 'import torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook' 2>/dev/null ||
        echo "$PYTHON cannot import torch's PowerSGD hook"
      ;;
  esac
}

# The periodic_eval.py command of a row's rank: its flags, then the script
# (DDP hooks through bench/models/ddp_hooked.py) and its flags.
model_command() {
  local config=$1 dir=$2 link_flag=$3 hook
  hook=$(model_hook "$config")
  local command=("$PYTHON" "$HERE/periodic_eval.py" --every="$EVAL_EVERY")
  [[ -n $link_flag ]] && command+=("$link_flag")
  # ddp_hooked.py's start_powerSGD_iter: 2 dense warm-up steps.
  [[ $config == ddp-psgd* ]] && command+=(--mark=2)
  [[ -n $hook ]] && command+=("$root/bench/models/ddp_hooked.py" --hook="$hook")
  case "$config" in
    gradwire*) command+=("$MODEL_DIR/train.py") ;;
    *) command+=("$MODEL_DIR/original.py") ;;
  esac
  printf '%s\n' "${command[@]}" "${MODEL_SCRIPT_FLAGS[@]}" "${ROW_STEPS_FLAGS[@]}"
}

# model_compute DIR LAUNCHED: two copies of original.py at once, each one worker
# with no exchange (WORLD_SIZE 1), so that they share the machine's cores
# as the two workers of the other rows do; nothing on the network.
model_compute() {
  local dir=$1 i pids=() command
  mapfile -t command < <(model_command compute "$dir" "")
  for i in 0 1; do
    (cd "$MODEL_DIR" && exec env -u RANK -u WORLD_SIZE AUTO_LAUNCHED_AT="$2" \
      timeout 7200 "${command[@]}" --summary="$dir/worker-$i.json") \
      >"$dir/worker$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do
    wait "${pids[$i]}" || topology_fail "compute-only copy $i exited with $?"
  done
}

# model_ddp LINK DIR CONFIG LAUNCHED: original.py as 2 DDP ranks on the
# worker hosts of LINK (no shards), rank 0's host the rendezvous; gloo on
# the link (GLOO_SOCKET_IFNAME).
model_ddp() {
  local link=$1 dir=$2 config=$3 i pids=() command master port=29511
  shaped_up "$link" 0 2 "$dir"
  master=$(netns_address 20)
  mapfile -t command < <(model_command "$config" "$dir" --link=eth0)
  link_counters "$dir/link-start.txt"
  for i in 0 1; do
    (cd "$MODEL_DIR" && exec ip netns exec "$(netns_ns "worker$i")" env \
      RANK="$i" WORLD_SIZE=2 MASTER_ADDR="$master" MASTER_PORT="$port" \
      GLOO_SOCKET_IFNAME=eth0 AUTO_LAUNCHED_AT="$4" timeout 7200 \
      "${command[@]}" --summary="$dir/worker-{rank}.json") \
      >"$dir/worker$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do
    wait "${pids[$i]}" || topology_fail "DDP rank $i exited with $?"
  done
  link_counters "$dir/link-end.txt"
  topology_down
}

# model_gradwire LINK DIR CONFIG LAUNCHED: 2 shards on their own hosts, as
# the CNN's rows place them, and on each worker host `gradwire run` of one
# node of 2 (--nnodes) joining them, running train.py.
model_gradwire() {
  local link=$1 dir=$2 config=$3 i pids=() command master compression
  shaped_up "$link" 2 2 "$dir"
  master=$(netns_address 20)
  compression=$(model_compression "$config")
  mapfile -t command < <(model_command "$config" "$dir" --link=eth0)
  link_counters "$dir/link-start.txt"
  for i in 0 1; do
    local variables=(-u GRADWIRE_COMPRESSION)
    [[ -n $compression ]] && variables=(GRADWIRE_COMPRESSION="$compression")
    (cd "$MODEL_DIR" && exec ip netns exec "$(netns_ns "worker$i")" env \
      "${variables[@]}" GRADWIRE_STATS_JSON="$dir/stats-{rank}.json" \
      AUTO_LAUNCHED_AT="$4" timeout 7200 "$BIN/gradwire" run -n 1 \
      --nnodes=2 --node-rank="$i" --master-addr="$master" \
      --shard-addresses="$TOPOLOGY_ADDRESSES" -- \
      "${command[@]}" --summary="$dir/worker-{rank}.json") \
      >"$dir/worker$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do
    wait "${pids[$i]}" || topology_fail "gradwire run of node $i exited with $?"
  done
  link_counters "$dir/link-end.txt"
  topology_down
}

# model_row LINK CONFIG STEPS: one row, appended to $ROWS; a row that
# cannot run here, or fails, is recorded as such and the matrix goes on.
model_row() {
  local link=$1 config=$2 steps=$3 title reason dir load launched
  title=$(model_title "$config")
  reason=$(model_unavailable "$config")
  if [[ -n $reason ]]; then
    echo "=== $link: $title: not available ($reason)" >&2
    "$PYTHON" "$HERE/auto_report.py" unavailable --link="$link" \
      --config="$config" --title="$title" --reason="$reason" >>"$ROWS"
    return
  fi
  dir="$WORK/$link-$config"
  mkdir -p "$dir"
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "=== $link: $title, $steps steps (load $load)" >&2
  ROW_STEPS_FLAGS=(--steps="$steps")
  local rc=0
  set +e
  (
    set -e
    launched=$(now)
    case "$config" in
      compute) model_compute "$dir" "$launched" ;;
      ddp*) model_ddp "$link" "$dir" "$config" "$launched" ;;
      *) model_gradwire "$link" "$dir" "$config" "$launched" ;;
    esac
    "$PYTHON" "$HERE/auto_report.py" model-record --link="$link" \
      --config="$config" --title="$title" --steps="$PLANNED_STEPS" \
      --compression="$(model_compression "$config")" \
      --hook="$(model_hook "$config")" --elapsed="$(elapsed_since "$launched")" \
      --load="$load" "$dir" >>"$ROWS"
  )
  rc=$?
  set -e
  if [[ $rc == 0 ]]; then
    tail -n 1 "$ROWS" | cut -c1-300 >&2
    return
  fi
  netns_cleanup
  for log in "$dir"/*.log; do
    [[ -f "$log" ]] && { echo "--- $log (last lines)" >&2; tail -n 15 "$log" >&2; }
  done
  "$PYTHON" "$HERE/auto_report.py" unavailable --status=failed \
    --link="$link" --config="$config" --title="$title" \
    --reason="the run failed (exit $rc; its logs on stderr)" >>"$ROWS"
}
