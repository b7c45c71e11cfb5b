#!/usr/bin/env bash
# `gradwire run` across hosts, as torchrun runs a job: two hosts (network
# namespaces, netns.sh), one `gradwire run --nnodes 2 --node-rank R
# --master-addr HOST0` on each, two workers per host. Node 0 starts two
# shards on HOST0 above --master-port; node 1 finds them there. Each
# worker is gradwire-worker under a wrapper that reads the environment
# contract (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; GRADWIRE_SHARDS
# and GRADWIRE_LOCAL_STORE it reads itself): the two workers of a host are
# its local group and push as one gradwire worker. Checks that both runs
# exit 0, that every worker saw its torchrun place, and that all four
# workers end with the same steps and the same weights. Then the same over
# mutual TLS (--tls-dir) with a token per node. Then a torchrun
# script (its own init_process_group("gloo") beside gradwire's
# DistributedOptimizer) the same way, where the Python package is built.
# First, the bad command lines: a --node-rank outside [0, --nnodes) and a
# missing --master-addr are refused with exit 2 and the fix named.
#
#   tests/cluster/run_nodes_test.sh [--bin DIR]
#
# Exit: 0 passed, 1 failed, 77 skipped (not root, or no namespaces here).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/netns.sh
source "$here/netns.sh"
# shellcheck source=tests/cluster/topology.sh
source "$here/topology.sh"

BIN=build/bin
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --bin=*) BIN=${1#*=}; shift ;;
    *) echo "run_nodes_test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
BIN=$(cd "$BIN" && pwd)
for b in gradwire-server gradwire-worker gradwire; do
  [[ -x "$BIN/$b" ]] || { echo "run_nodes_test.sh: $BIN/$b is missing" >&2; exit 1; }
done

# Bad command lines need no hosts.
expect_usage_error() {
  local want=$1 out code=0
  shift
  out=$("$BIN/gradwire" run "$@" -- true 2>&1) || code=$?
  [[ $code == 2 ]] || topology_fail "gradwire run $* exited $code, not 2: $out"
  [[ "$out" == *"$want"* ]] || topology_fail "gradwire run $*: '$out' does not say '$want'"
}
expect_usage_error "--node-rank: 2 is outside [0, 2)" \
  --nnodes 2 --node-rank 2 --master-addr 10.0.0.1 -n 1
expect_usage_error "--master-addr is required with --nnodes > 1" \
  --nnodes 2 --node-rank 1 -n 1
expect_usage_error "--node-rank needs --nnodes" --node-rank 1 -n 1

netns_require
topology_work_dir
work=$TOPOLOGY_WORK
netns_init 10gbit
netns_add_host node0 10
netns_add_host node1 11
master=$(netns_address 10)
MASTER_PORT=29600
STEPS=10

# The worker: its place from torchrun's variables; gradwire's worker is the
# node (RANK / LOCAL_WORLD_SIZE of WORLD_SIZE / LOCAL_WORLD_SIZE).
# shellcheck disable=SC2016 # expanded by the workers' shell
worker='echo "place $RANK/$WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE master $MASTER_ADDR:$MASTER_PORT shards $GRADWIRE_SHARDS"
exec "$0" --worker-id=$((RANK / LOCAL_WORLD_SIZE)) \
  --num-workers=$((WORLD_SIZE / LOCAL_WORLD_SIZE)) \
  --local-rank="$LOCAL_RANK" --local-size="$LOCAL_WORLD_SIZE" \
  --progress=log --evaluate=false "$@"'
pids=()
for node in 0 1; do
  mkdir -p "$work/node$node"
  ip netns exec "$(netns_ns "node$node")" timeout 600 "$BIN/gradwire" run \
    --nnodes 2 --node-rank "$node" --master-addr "$master" \
    --master-port "$MASTER_PORT" -n 2 --shards 2 \
    --run-dir "$work/node$node" -- sh -c "$worker" "$BIN/gradwire-worker" \
    --model=mlp --train-limit=4000 --test-limit=500 --compressor=topk \
    --ratio=0.01 --max-steps="$STEPS" --epochs=1 \
    >"$work/node$node/run.log" 2>&1 &
  pids+=($!)
done
for node in 0 1; do
  wait "${pids[$node]}" || topology_fail "gradwire run on node $node exited with $?"
done

fingerprint=""
for node in 0 1; do
  for i in 0 1; do
    rank=$((node * 2 + i))
    want="[$i] place $rank/4 local $i/2 master $master:$MASTER_PORT shards $master:$((MASTER_PORT + 1)),$master:$((MASTER_PORT + 2))"
    grep -qF "$want" "$work/node$node/run.log" ||
      topology_fail "node $node worker $i: no line '$want'"
    summary="$work/node$node/worker-$i.json"
    steps=$(json_value "$summary" steps)
    [[ "$steps" == "$STEPS" ]] || topology_fail "rank $rank ran '$steps' steps, not $STEPS"
    f=$(json_value "$summary" weights_fingerprint)
    [[ -n "$f" ]] || topology_fail "rank $rank wrote no weights_fingerprint"
    [[ -z "$fingerprint" || "$f" == "$fingerprint" ]] ||
      topology_fail "rank $rank ends with weights $f, rank 0 with $fingerprint"
    fingerprint=$f
  done
done
echo "2 nodes x 2 workers: every rank saw its place, ran $STEPS steps and" \
     "ends with the same weights ($fingerprint)"

# The same over mutual TLS with a token per node: node 0's shards take the
# tokens of workers 0 and 1 (the nodes), and every worker of node R sends
# worker-token-R.
"$here/../../scripts/dev-certs.sh" "$work/tls" --workers 2 \
  --hosts "localhost,127.0.0.1,$master" >/dev/null
pids=()
for node in 0 1; do
  mkdir -p "$work/tls$node"
  ip netns exec "$(netns_ns "node$node")" timeout 600 "$BIN/gradwire" run \
    --nnodes 2 --node-rank "$node" --master-addr "$master" \
    --master-port $((MASTER_PORT + 10)) -n 2 --tls-dir "$work/tls" \
    --run-dir "$work/tls$node" -- sh -c "$worker" "$BIN/gradwire-worker" \
    --model=mlp --train-limit=4000 --test-limit=500 --max-steps="$STEPS" \
    --epochs=1 >"$work/tls$node/run.log" 2>&1 &
  pids+=($!)
done
for node in 0 1; do
  wait "${pids[$node]}" || topology_fail "gradwire run over TLS on node $node exited with $?"
done
for node in 0 1; do
  for i in 0 1; do
    line=$(grep "transport: " "$work/tls$node/worker-$i.log" || true)
    [[ -n "$line" && "$line" != *plaintext* && "$line" != *"auth token: off"* ]] ||
      topology_fail "node $node worker $i: not TLS with a token ('$line')"
  done
  steps=$(json_value "$work/tls$node/worker-0.json" steps)
  [[ "$steps" == "$STEPS" ]] || topology_fail "TLS: node $node ran '$steps' steps, not $STEPS"
done
echo "2 nodes over mutual TLS, each with its own token: $STEPS steps"

# The same with a torchrun script: its own init_process_group("gloo") at
# MASTER_ADDR:MASTER_PORT next to gradwire's DistributedOptimizer, whose
# local group is the node. Needs the Python package next to the binaries
# (BIN/../python) and an interpreter with torch (GRADWIRE_PYTHON, default
# /usr/bin/python3); without them this case is left out and says so.
python=${GRADWIRE_PYTHON:-/usr/bin/python3}
package=$(cd "$BIN/.." && pwd)/python
if ! PYTHONPATH=$package "$python" -c "import gradwire.torch" 2>/dev/null; then
  echo "torchrun script: SKIPPED (no gradwire package in $package for $python)"
  exit 0
fi
cat >"$work/script.py" <<'PY'
import torch, torch.distributed as dist
import gradwire, gradwire.torch
gradwire.init()
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
optimizer = gradwire.torch.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.1), model)
torch.manual_seed(dist.get_rank() + 1)
for _ in range(5):
    optimizer.zero_grad()
    model(torch.randn(16, 8)).pow(2).mean().backward()
    optimizer.step()
weights = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = [torch.zeros_like(weights) for _ in range(dist.get_world_size())]
dist.all_gather(gathered, weights)
agree = all(torch.equal(gathered[0], w) for w in gathered)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} agree {agree}")
dist.destroy_process_group()
PY
pids=()
for node in 0 1; do
  mkdir -p "$work/python$node"
  # GLOO_SOCKET_IFNAME: the script's own gloo talks over the hosts' link.
  PYTHONPATH=$package GLOO_SOCKET_IFNAME=eth0 \
    ip netns exec "$(netns_ns "node$node")" timeout 300 "$BIN/gradwire" run \
    --nnodes 2 --node-rank "$node" --master-addr "$master" -n 2 \
    --run-dir "$work/python$node" -- "$python" "$work/script.py" \
    >"$work/python$node/run.log" 2>&1 &
  pids+=($!)
done
for node in 0 1; do
  wait "${pids[$node]}" || topology_fail "the torchrun script on node $node exited with $?"
done
for rank in 0 1 2 3; do
  grep -qF "rank $rank of 4 agree True" "$work"/python*/run.log ||
    topology_fail "torchrun script: rank $rank did not report the same weights as rank 0"
done
echo "torchrun script: 4 ranks on 2 nodes, init_process_group(\"gloo\") and" \
     "gradwire side by side, the same weights everywhere"
