# shellcheck shell=bash
# The rows of bench/auto/auto.sh: what each configuration runs, and one run
# of it on one link, recorded as a line of $ROWS (auto_report.py record).
# Sourced by auto.sh after bench/common/shaped_links.sh; needs BIN, PYTHON,
# HERE, ROWS, WORK, MODEL_FLAGS (the flags every row shares) set.

# The configurations, in table order (auto.sh checks --configs against it).
# shellcheck disable=SC2034
AUTO_CONFIGS="compute dense fp16 topk1 topk01 auto ddp ddp-fp16"
AUTO_CONFIGS+=" ddp-psgd1 ddp-psgd2 ddp-psgd4 ddp-bpsgd4"

config_title() {
  case "$1" in
    compute) echo "compute only" ;;
    dense) echo "dense fp32" ;;
    fp16) echo "fp16" ;;
    topk1) echo "Top-K 1% + EF" ;;
    topk01) echo "Top-K 0.1% + EF" ;;
    auto) echo "auto" ;;
    ddp) echo "DDP dense fp32" ;;
    ddp-fp16) echo "DDP fp16" ;;
    ddp-psgd[124]) echo "DDP PowerSGD rank ${1#ddp-psgd}" ;;
    ddp-bpsgd4) echo "DDP batched PowerSGD rank 4" ;;
  esac
}

# The worker flags of a gradwire configuration (compute and DDP: none).
config_flags() {
  case "$1" in
    dense) echo "--compressor=none --value-type=fp32 --pull=dense" ;;
    fp16) echo "--compressor=fp16" ;;
    topk1) echo "--compressor=topk --ratio=0.01 --error-feedback --pull=delta" ;;
    topk01) echo "--compressor=topk --ratio=0.001 --error-feedback --pull=delta" ;;
    auto) echo "--compressor=auto" ;;
  esac
}

# The script (in bench/auto/) and its own flags of a DDP configuration;
# each takes worker.py's flags too.
config_ddp_command() {
  case "$1" in
    ddp) echo "ddp_link.py" ;;
    ddp-fp16) echo "ddp_fp16.py" ;;
    ddp-psgd[124]) echo "ddp_powersgd.py --powersgd-rank=${1#ddp-psgd}" ;;
    ddp-bpsgd4) echo "ddp_powersgd.py --powersgd-rank=4 --powersgd-batched" ;;
  esac
}

# Empty when this gradwire-worker and Python can run CONFIG; otherwise why
# not (one line).
config_unavailable() {
  case "$1" in
    auto)
      "$BIN/gradwire-worker" --compressor=auto --dry-run >/dev/null 2>"$WORK/auto-check" ||
        head -n 1 "$WORK/auto-check"
      ;;
    ddp | ddp-fp16)
      "$PYTHON" -c 'import torch.distributed, gradwire' 2>/dev/null ||
        echo "$PYTHON cannot import torch.distributed and gradwire (PYTHONPATH=$PYTHONPATH)"
      ;;
    ddp-psgd* | ddp-bpsgd*)
      "$PYTHON" -c 'import gradwire
import torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook' 2>/dev/null ||
        echo "$PYTHON cannot import gradwire and torch's PowerSGD hook (PYTHONPATH=$PYTHONPATH)"
      ;;
  esac
}

now() { date +%s.%N; }
elapsed_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f\n", b - a }'; }

# link_counters FILE: each worker host's interface counters, a line
# "worker<i> SENT RECEIVED" per host: the bytes of every packet its eth0
# sent and received since it was made (headers included; the host's only
# link, so all its traffic). auto_report.py record reads the files
# link-start.txt and link-end.txt of a row's directory.
link_counters() {
  local i sent received stats=/sys/class/net/eth0/statistics
  for i in 0 1; do
    { read -r sent && read -r received; } < <(ip netns exec \
      "$(netns_ns "worker$i")" cat "$stats/tx_bytes" "$stats/rx_bytes")
    echo "worker$i $sent $received"
  done >"$1"
}

# row_compute DIR: both workers' steps alone (no shards, no network).
row_compute() {
  local dir=$1 start
  start=$(now)
  shaped_compute_only "$dir" "${MODEL_FLAGS[@]}" "${ROW_STEPS_FLAGS[@]}"
  ROW_ELAPSED=$(elapsed_since "$start")
}

# row_gradwire LINK DIR FLAGS...: 2 shards and 2 gradwire-workers on
# separate network hosts joined by LINK. The worker hosts' counters are
# read around the workers' run (after the shards' health checks).
row_gradwire() {
  local link=$1 dir=$2 start
  shift 2
  shaped_up "$link" 2 2 "$dir"
  link_counters "$dir/link-start.txt"
  start=$(now)
  topology_train "$dir" "${MODEL_FLAGS[@]}" "${ROW_STEPS_FLAGS[@]}" "$@"
  ROW_ELAPSED=$(elapsed_since "$start")
  link_counters "$dir/link-end.txt"
  topology_down
}

# row_ddp LINK DIR SCRIPT [FLAGS...]: 2 DDP processes (a script that
# takes bench/python/worker.py's flags, --baseline=ddp, after its own
# FLAGS) on the worker hosts of LINK, no shards; rank 0's host is the
# rendezvous. Each learns its rank from RANK, WORLD_SIZE, MASTER_ADDR and
# MASTER_PORT as torch expects, and from the same values as flags, which
# worker.py reads; GLOO_SOCKET_IFNAME names the link, whose bytes during
# the steps the scripts of bench/auto count (ddp_link.py). The worker
# hosts' counters are read around the whole run as well.
row_ddp() {
  local link=$1 dir=$2 script=$3 start i pids=()
  shift 3
  shaped_up "$link" 0 2 "$dir"
  local master port=29511
  master=$(netns_address 20)
  link_counters "$dir/link-start.txt"
  start=$(now)
  for i in 0 1; do
    local evaluate=true
    [[ $i == 0 ]] || evaluate=false
    ip netns exec "$(netns_ns "worker$i")" env RANK="$i" WORLD_SIZE=2 \
      MASTER_ADDR="$master" MASTER_PORT="$port" GLOO_SOCKET_IFNAME=eth0 \
      timeout 1800 "$PYTHON" "$script" "$@" --baseline=ddp --worker-id="$i" \
      --num-workers=2 --ddp-master="$master:$port" --progress=log \
      --evaluate="$evaluate" "${MODEL_FLAGS[@]}" "${ROW_STEPS_FLAGS[@]}" \
      --summary-json="$dir/worker-$i.json" >"$dir/worker$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do
    wait "${pids[$i]}" || topology_fail "DDP rank $i exited with $?"
  done
  ROW_ELAPSED=$(elapsed_since "$start")
  link_counters "$dir/link-end.txt"
  topology_down
}

# run_config LINK CONFIG DIR: the row's run (sets ROW_ELAPSED); for
# record, sets ROW_PAYLOAD and ROW_FLAGS.
run_config() {
  local link=$1 config=$2 dir=$3
  ROW_PAYLOAD=measured
  ROW_FLAGS=$(config_flags "$config")
  case "$config" in
    compute)
      ROW_PAYLOAD=none
      ROW_FLAGS="--compute-only"
      row_compute "$dir"
      ;;
    ddp*)
      ROW_PAYLOAD=computed
      local command
      read -r -a command <<<"$(config_ddp_command "$config")"
      ROW_FLAGS="${command[*]} --baseline=ddp"
      row_ddp "$link" "$dir" "$HERE/${command[0]}" "${command[@]:1}"
      ;;
    *)
      local flags
      read -r -a flags <<<"$ROW_FLAGS"
      row_gradwire "$link" "$dir" "${flags[@]}"
      ;;
  esac
}

# run_row LINK CONFIG STEPS [SEED]: one row, appended to $ROWS. STEPS 0
# trains the whole epoch. A row that cannot run here, or fails, is
# recorded as such (with the end of its logs on stderr) and the matrix
# goes on.
run_row() {
  local link=$1 config=$2 steps=$3 seed=${4:-}
  local title reason dir load seed_flag=()
  title=$(config_title "$config")
  [[ -n $seed ]] && seed_flag=(--seed="$seed")
  reason=$(config_unavailable "$config")
  if [[ -n $reason ]]; then
    echo "=== $link: $title: not available ($reason)" >&2
    "$PYTHON" "$HERE/auto_report.py" unavailable --link="$link" \
      --config="$config" --title="$title" --reason="$reason" \
      "${seed_flag[@]}" >>"$ROWS"
    return
  fi
  dir="$WORK/$link-$config${seed:+-s$seed}"
  mkdir -p "$dir"
  load=$(cut -d' ' -f1 /proc/loadavg)
  local what="$steps steps"
  [[ $steps == 0 ]] && what="one epoch"
  echo "=== $link: $title, $what${seed:+, seed $seed} (load $load)" >&2
  ROW_STEPS_FLAGS=(--epochs=1 "${seed_flag[@]}")
  [[ $steps == 0 ]] || ROW_STEPS_FLAGS+=(--max-steps="$steps")
  # A subshell, so that a failing run (topology_fail exits) ends only its
  # row; what it leaves in the namespaces is cleaned up here. Not in an
  # `if`: there bash would ignore errexit inside it.
  local rc=0
  set +e
  (
    set -e
    run_config "$link" "$config" "$dir"
    "$PYTHON" "$HERE/auto_report.py" record --link="$link" \
      --config="$config" --title="$title" --steps="$PLANNED_STEPS" \
      --flags="$ROW_FLAGS" --elapsed="$ROW_ELAPSED" --load="$load" \
      --payload="$ROW_PAYLOAD" "${seed_flag[@]}" "$dir" >>"$ROWS"
  )
  rc=$?
  set -e
  if [[ $rc == 0 ]]; then
    tail -n 1 "$ROWS" >&2
    return
  fi
  netns_cleanup
  for log in "$dir"/*.log; do
    [[ -f "$log" ]] && { echo "--- $log (last lines)" >&2; tail -n 15 "$log" >&2; }
  done
  "$PYTHON" "$HERE/auto_report.py" unavailable --status=failed \
    --link="$link" --config="$config" --title="$title" \
    --reason="the run failed (exit $rc; its logs on stderr)" \
    "${seed_flag[@]}" >>"$ROWS"
}
