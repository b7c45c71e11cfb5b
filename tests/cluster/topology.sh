# The compose topology on separate network hosts (netns.sh): shards 0..S-1
# at 10.88.0.(10+i):7000 and workers 0..W-1 at 10.88.0.(20+i). Sourced by
# the cluster test and the network benchmark after netns.sh.
#
#   topology_up RATE SHARDS WORKERS DIR   # hosts, shards started and serving
#   topology_train DIR WORKER_FLAGS...    # workers run to the end (0 or fail)
#   topology_down                         # SIGTERM the shards: must exit 0
#
# BIN (the directory of the binaries) must be set. Logs and worker
# summaries go to DIR (DIR/worker-i.json, DIR/*.log). TOPOLOGY_SERVER_FLAGS
# (optional, words separated by spaces) is added to every shard's flags,
# e.g. TOPOLOGY_SERVER_FLAGS=--init-preferred-grace-seconds=0.

TOPOLOGY_SHARD_PIDS=()
TOPOLOGY_SHARDS=0
TOPOLOGY_WORKERS=0
TOPOLOGY_ADDRESSES=""

topology_fail() { echo "FAILED: $*" >&2; exit 1; }

# Waits until `gradwire health` from host $1 sees $2 serving.
topology_wait_serving() {
  local from=$1 address=$2
  for _ in $(seq 1 60); do
    if netns_run "$from" "$BIN/gradwire" health --addr="$address" \
        --timeout-seconds=1 >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  topology_fail "shard $address did not become healthy within 30 s (seen from $from)"
}

topology_up() {
  local rate=$1 dir=$4
  TOPOLOGY_SHARDS=$2
  TOPOLOGY_WORKERS=$3
  netns_init "$rate"
  local i addresses=()
  for ((i = 0; i < TOPOLOGY_SHARDS; ++i)); do
    netns_add_host "shard$i" $((10 + i))
    addresses+=("$(netns_address $((10 + i))):7000")
  done
  for ((i = 0; i < TOPOLOGY_WORKERS; ++i)); do
    netns_add_host "worker$i" $((20 + i))
  done
  TOPOLOGY_ADDRESSES=$(IFS=,; echo "${addresses[*]}")
  TOPOLOGY_SHARD_PIDS=()
  local extra=()
  read -ra extra <<<"${TOPOLOGY_SERVER_FLAGS:-}"
  for ((i = 0; i < TOPOLOGY_SHARDS; ++i)); do
    ip netns exec "$(netns_ns "shard$i")" "$BIN/gradwire-server" --address=0.0.0.0 --port=7000 \
      --shard-id="$i" --num-shards="$TOPOLOGY_SHARDS" \
      --num-workers="$TOPOLOGY_WORKERS" --checkpoint-dir="$dir/ckpt-$i" \
      "${extra[@]}" >"$dir/shard$i.log" 2>&1 &
    TOPOLOGY_SHARD_PIDS+=($!)
  done
  for ((i = 0; i < TOPOLOGY_SHARDS; ++i)); do
    topology_wait_serving worker0 "${addresses[$i]}"
  done
}

# Runs every worker with the given flags (worker 0 evaluates, the others
# not) and fails unless all exit 0 within 20 minutes.
topology_train() {
  local dir=$1
  shift
  local i pids=()
  for ((i = 0; i < TOPOLOGY_WORKERS; ++i)); do
    local evaluate=true
    [[ $i == 0 ]] || evaluate=false
    ip netns exec "$(netns_ns "worker$i")" timeout 1200 "$BIN/gradwire-worker" \
      --shards="$TOPOLOGY_ADDRESSES" --worker-id="$i" \
      --num-workers="$TOPOLOGY_WORKERS" --progress=log --evaluate="$evaluate" \
      --summary-json="$dir/worker-$i.json" "$@" >"$dir/worker$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < TOPOLOGY_WORKERS; ++i)); do
    wait "${pids[$i]}" || topology_fail "worker $i exited with $?"
  done
}

topology_down() {
  local i
  for pid in "${TOPOLOGY_SHARD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = 0; i < ${#TOPOLOGY_SHARD_PIDS[@]}; ++i)); do
    wait "${TOPOLOGY_SHARD_PIDS[$i]}" ||
      topology_fail "shard $i exited with $? after SIGTERM"
  done
  TOPOLOGY_SHARD_PIDS=()
  netns_cleanup
  local left
  left=$(netns_leftovers)
  [[ -z "$left" ]] || topology_fail "namespaces left behind: $left"
}

# Kills whatever still runs (for an EXIT trap) and removes the namespaces.
topology_abort() {
  for pid in "${TOPOLOGY_SHARD_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  netns_cleanup
}

# Makes a work directory (TOPOLOGY_WORK) and, on any exit, stops what runs,
# removes the namespaces, shows the end of every log after a failure and
# deletes the directory.
topology_work_dir() {
  TOPOLOGY_WORK=$(mktemp -d)
  trap topology_finish EXIT
  trap 'exit 130' INT TERM
}

topology_finish() {
  local code=$?
  topology_abort
  if [[ $code != 0 ]]; then
    for log in "$TOPOLOGY_WORK"/*/*.log; do
      [[ -f "$log" ]] || continue
      echo "--- $log (last lines)" >&2
      tail -n 15 "$log" >&2
    done
  fi
  rm -rf "$TOPOLOGY_WORK"
  exit "$code"
}

# The value of metric METRIC (first sample, labels ignored) on host NAME's
# /metrics at 127.0.0.1:PORT, as an integer; empty when it does not answer.
# Reads through the namespace's loopback, which a cut link leaves up, with
# bash's /dev/tcp: no HTTP client needed.
topology_metric() {
  local name=$1 port=$2 metric=$3
  # shellcheck disable=SC2016 # expanded by the inner bash
  netns_run "$name" timeout 3 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
    printf "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n" >&3
    cat <&3' _ "$port" 2>/dev/null |
    awk -v m="$metric" '$1 == m || index($1, m "{") == 1 { printf "%d\n", $2; exit }' || true
}

# The value of a key in a flat JSON file.
json_value() { sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p" "$1"; }
