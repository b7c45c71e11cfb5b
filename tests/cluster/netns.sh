# Separate network hosts for gradwire processes on one Linux machine: one
# network namespace per service, each joined by a veth link to a bridge that
# lives in a namespace of its own, every link shaped with tc. Sourced by the
# cluster test and the network benchmark; needs root (CAP_NET_ADMIN).
#
#   source tests/cluster/netns.sh
#   netns_init 1gbit                 # or 10gbit; sets up the bridge
#   netns_add_host shard0 10         # namespace with address 10.88.0.10
#   netns_run shard0 CMD...          # CMD inside shard0's namespace
#   ip netns exec "$(netns_ns shard0)" CMD &   # the same in the background
#   netns_link_down shard0 / netns_link_up shard0
#   netns_cleanup                    # kills what runs there, removes all
#
# Shaping: a token bucket (tbf) at the profile's rate on both ends of every
# link, so each host sends and receives at most that rate. Where the kernel
# has sch_netem, a delay (NETNS_DELAY, default 0.2ms per direction) is added
# as well; where it has not, the links have no added delay and
# netns_init says so.

NETNS_SUBNET=10.88.0
NETNS_PREFIX="gw$(($$ % 100000))"
NETNS_BRIDGE_NS="${NETNS_PREFIX}-br"
NETNS_DELAY="${NETNS_DELAY:-0.2ms}"
NETNS_HOSTS=()
NETNS_RATE=""
NETNS_HAVE_NETEM=0

# Exit code that CTest reads as "skipped".
NETNS_SKIP=77

netns_log() { echo "netns: $*" >&2; }

# Fails with NETNS_SKIP (and says why) where namespaces cannot be made.
netns_require() {
  if [[ $(id -u) != 0 ]]; then
    echo "SKIPPED: separate network hosts need root (ip netns); run as root" >&2
    exit "$NETNS_SKIP"
  fi
  if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    echo "SKIPPED: ip and tc (iproute2) are missing; scripts/install-deps.sh installs them" >&2
    exit "$NETNS_SKIP"
  fi
  local probe="${NETNS_PREFIX}-probe"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "SKIPPED: this kernel or container does not allow network namespaces (ip netns add failed)" >&2
    exit "$NETNS_SKIP"
  fi
  ip netns del "$probe"
}

# Shapes `dev` in namespace `ns` to the profile.
netns_shape() {
  local ns=$1 dev=$2
  # Burst: about 1 ms of traffic at the rate, at least 64 KiB. A larger
  # bucket would pass every push of a step at line rate on a slow link.
  local burst
  case "$NETNS_RATE" in
    10mbit | 100mbit) burst=64kb ;;
    1gbit) burst=128kb ;;
    10gbit) burst=1280kb ;;
    *) burst=256kb ;;
  esac
  if [[ $NETNS_HAVE_NETEM == 1 ]]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem \
      delay "$NETNS_DELAY"
    ip netns exec "$ns" tc qdisc add dev "$dev" parent 1: handle 2: tbf \
      rate "$NETNS_RATE" burst "$burst" latency 100ms
  else
    ip netns exec "$ns" tc qdisc add dev "$dev" root tbf \
      rate "$NETNS_RATE" burst "$burst" latency 100ms
  fi
}

# Creates the bridge namespace and checks which qdiscs the kernel has.
# $1: the rate profile: 1gbit or 10gbit (the data-centre profiles),
# 100mbit (a congested link) or 10mbit (a cross-site link).
netns_init() {
  NETNS_RATE=$1
  case "$NETNS_RATE" in
    10mbit|100mbit|1gbit|10gbit) ;;
    *) netns_log "unknown rate profile '$NETNS_RATE' (10mbit, 100mbit, 1gbit or 10gbit)"; return 2 ;;
  esac
  ip netns add "$NETNS_BRIDGE_NS"
  ip -n "$NETNS_BRIDGE_NS" link set lo up
  ip -n "$NETNS_BRIDGE_NS" link add br0 type bridge
  ip -n "$NETNS_BRIDGE_NS" link set br0 up
  # Probe netem on a throw-away dummy link.
  if ip -n "$NETNS_BRIDGE_NS" link add probe0 type dummy 2>/dev/null &&
     ip netns exec "$NETNS_BRIDGE_NS" tc qdisc add dev probe0 root netem \
       delay 1ms 2>/dev/null; then
    NETNS_HAVE_NETEM=1
  fi
  ip -n "$NETNS_BRIDGE_NS" link del probe0 2>/dev/null || true
  if [[ $NETNS_HAVE_NETEM == 1 ]]; then
    netns_log "links: $NETNS_RATE, $NETNS_DELAY delay each way (tbf + netem)"
  else
    netns_log "links: $NETNS_RATE (tbf); no added delay: this kernel has no sch_netem"
  fi
}

# netns_add_host NAME N: namespace PREFIX-NAME with address SUBNET.N/24 on
# a shaped veth link to the bridge.
netns_add_host() {
  local name=$1 n=$2
  local ns="${NETNS_PREFIX}-${name}"
  local inside="eth0" outside="v${NETNS_PREFIX#gw}h${n}"
  ip netns add "$ns"
  NETNS_HOSTS+=("$name")
  ip -n "$ns" link set lo up
  ip link add "$outside" type veth peer name "${outside}x"
  ip link set "${outside}x" netns "$ns"
  ip -n "$ns" link set "${outside}x" name "$inside"
  ip link set "$outside" netns "$NETNS_BRIDGE_NS"
  ip -n "$NETNS_BRIDGE_NS" link set "$outside" master br0
  ip -n "$NETNS_BRIDGE_NS" link set "$outside" up
  ip -n "$ns" addr add "${NETNS_SUBNET}.${n}/24" dev "$inside"
  ip -n "$ns" link set "$inside" up
  netns_shape "$ns" "$inside"
  netns_shape "$NETNS_BRIDGE_NS" "$outside"
}

netns_address() { echo "${NETNS_SUBNET}.$1"; }

# The namespace of host NAME. To start a process in the background, run
# `ip netns exec "$(netns_ns NAME)" CMD &` (then $! is CMD's pid; a
# backgrounded shell function would give a subshell's pid instead).
netns_ns() { echo "${NETNS_PREFIX}-$1"; }

# Runs a command in host NAME's namespace (in the foreground).
netns_run() {
  local name=$1
  shift
  ip netns exec "${NETNS_PREFIX}-${name}" "$@"
}

# Cuts and restores host NAME's link (its end and the bridge's end).
netns_link_down() { ip -n "${NETNS_PREFIX}-$1" link set eth0 down; }
netns_link_up() { ip -n "${NETNS_PREFIX}-$1" link set eth0 up; }

# Namespaces of this run that still exist.
netns_leftovers() {
  ip netns list | awk '{print $1}' | grep "^${NETNS_PREFIX}-" || true
}

# Kills every process left in this run's namespaces and removes them.
netns_cleanup() {
  local ns
  for ns in $(netns_leftovers); do
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [[ -n "$pids" ]]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
  done
  NETNS_HOSTS=()
}
