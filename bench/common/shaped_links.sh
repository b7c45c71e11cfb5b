# shellcheck shell=bash
# The shaped-link benchmarks' shared steps (bench/network/network.sh,
# bench/auto/auto.sh): the separate network hosts of tests/cluster/netns.sh
# and the shard/worker topology of tests/cluster/topology.sh, an unshaped
# variant of that topology, and the compute-only reference (the same two
# workers' steps with nothing on the network). Sourced; needs root for the
# namespaces (netns_require says so and exits 77 without it).
#
#   source bench/common/shaped_links.sh
#   shaped_up LINK SHARDS WORKERS DIR   # LINK: a netns.sh profile or unshaped
#   topology_train DIR WORKER_FLAGS...  # (topology.sh)
#   topology_down                       # (topology.sh)
#   shaped_compute_only DIR FLAGS...    # 2 workers, --compute-only
#
# BIN (the directory of the binaries) must be set before any of them runs.

shaped_links_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/cluster/netns.sh
source "$shaped_links_root/tests/cluster/netns.sh"
# shellcheck source=tests/cluster/topology.sh
source "$shaped_links_root/tests/cluster/topology.sh"

# The links shaped_up takes: netns.sh's rate profiles and "unshaped".
SHAPED_LINKS="10mbit 100mbit 1gbit 10gbit unshaped"

# Succeeds when $1 names one of SHAPED_LINKS.
shaped_link_known() { [[ " $SHAPED_LINKS " == *" $1 "* ]]; }

# shaped_up LINK SHARDS WORKERS DIR: topology_up on links of LINK. The
# unshaped links are the same namespaces, veth pairs and bridge with every
# qdisc taken off again (no rate, no added delay), so that an unshaped row
# differs from a shaped one only in the shaping.
shaped_up() {
  local link=$1
  shift
  if [[ $link != unshaped ]]; then
    topology_up "$link" "$@"
    return
  fi
  topology_up 10gbit "$@"
  local name dev
  for name in "${NETNS_HOSTS[@]}"; do
    ip netns exec "$(netns_ns "$name")" tc qdisc del dev eth0 root
  done
  # The bridge's ends of the veth pairs ("vNNNhM@ifK:" in `ip -o link`).
  for dev in $(ip -n "$NETNS_BRIDGE_NS" -o link show type veth |
      awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
    ip netns exec "$NETNS_BRIDGE_NS" tc qdisc del dev "$dev" root
  done
  netns_log "links: unshaped (qdiscs removed: no rate limit, no added delay)"
}

# shaped_compute_only DIR FLAGS...: two gradwire-worker processes at once,
# each training its part of the data alone (--compute-only: local SGD, no
# shards, nothing on the network), to the end; DIR/worker-i.json holds
# their summaries, DIR/worker-i.log their output. Exits 1 if one fails.
shaped_compute_only() {
  local dir=$1
  shift
  local i pids=()
  mkdir -p "$dir"
  for i in 0 1; do
    timeout 1200 "$BIN/gradwire-worker" --compute-only --worker-id="$i" \
      --num-workers=2 --progress=log "$@" \
      --summary-json="$dir/worker-$i.json" >"$dir/worker$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do
    wait "${pids[$i]}" || { echo "FAILED: compute-only worker $i" >&2; exit 1; }
  done
}
