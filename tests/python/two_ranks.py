"""Two worker processes as torchrun starts a 2-process job on one host
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, one local rank each), for the
tests whose workers are scripts of their own (ddp_hook_worker.py,
mixed_precision_worker.py)."""

import os
import socket
import subprocess
import sys


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_ranks(tmp_path, name, worker, args, shards=(), timeout=300):
    """Runs `worker` (a script path) with `args` as ranks 0 and 1 to the
    end, GRADWIRE_SHARDS naming `shards` where given and
    GRADWIRE_COMPRESSION unset, each logging to tmp_path/NAME-RANK.log.
    Fails the test with the log's end when a rank exits non-zero."""
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), LOCAL_RANK="0",
               LOCAL_WORLD_SIZE="1")
    env.pop("GRADWIRE_COMPRESSION", None)
    if shards:
        env["GRADWIRE_SHARDS"] = ",".join(s.address for s in shards)
    ranks = []
    for rank in range(2):
        log = open(tmp_path / f"{name}-{rank}.log", "w")
        ranks.append(subprocess.Popen(
            [sys.executable, str(worker), *args],
            env=dict(env, RANK=str(rank)), stdout=log,
            stderr=subprocess.STDOUT))
    for rank, process in enumerate(ranks):
        assert process.wait(timeout=timeout) == 0, (
            (tmp_path / f"{name}-{rank}.log").read_text()[-3000:])
