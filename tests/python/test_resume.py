"""Checkpoint and resume: 2 workers train N steps and save their
checkpoints, every process (workers and shards) is killed, the job restarts
from the checkpoints and the shards' checkpoint directory and trains M more
steps; its weights must equal those of an uninterrupted N + M-step run, bit
for bit (the same data, the same arithmetic in the same order: the shards
restore their weights and pull shadows exactly, the workers their
residuals and Adam's moments)."""

import os
import pathlib
import signal
import subprocess
import sys

import pytest
import torch

import gradwire

WORKER = pathlib.Path(__file__).with_name("resume_worker.py")
N, M = 6, 5


def start_workers(shards, tmp_path, *args, hold=False):
    env = dict(os.environ,
               GRADWIRE_SHARDS=",".join(s.address for s in shards),
               WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    workers = []
    for rank in range(2):
        log = open(tmp_path / f"worker-{rank}-{len(list(tmp_path.iterdir()))}"
                   ".log", "w")
        workers.append(subprocess.Popen(
            [sys.executable, str(WORKER), *args] + (["--hold"] if hold else []),
            env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE,
            stderr=log, text=True))
    return workers


def wait_ok(workers):
    for worker in workers:
        out, _ = worker.communicate(timeout=180)
        assert worker.returncode == 0, f"worker exited {worker.returncode}"


def wait_ready_then_kill(workers):
    for worker in workers:
        assert worker.stdout.readline().strip() == "READY"
    for worker in workers:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)


def uninterrupted(start_shards, tmp_path, exchange):
    shards = start_shards(2, 2)
    final = tmp_path / "reference.pt"
    wait_ok(start_workers(shards, tmp_path, "--from-step=0",
                          f"--to-step={N + M}",
                          f"--checkpoint={tmp_path / 'unused.pt'}",
                          f"--final={final}", f"--exchange={exchange}"))
    return torch.load(final)


@pytest.mark.parametrize("exchange", ["gradients", "updates"])
def test_resumed_job_ends_with_the_uninterrupted_weights(start_shards,
                                                         tmp_path, exchange):
    reference = uninterrupted(start_shards, tmp_path, exchange)
    state_dir = tmp_path / "shard-state"
    for shard_id in range(2):
        (state_dir / str(shard_id)).mkdir(parents=True)
    checkpoint = tmp_path / "job.pt"
    flags = [f"--checkpoint-dir={state_dir}/{{shard}}"]
    shards = start_shards(2, 2, *flags)
    wait_ready_then_kill(start_workers(
        shards, tmp_path, "--from-step=0", f"--to-step={N}",
        f"--checkpoint={checkpoint}", f"--exchange={exchange}", hold=True))
    for shard in shards:
        shard.kill()

    # Each shard restores from its own folder, as before the kill.
    restarted = start_shards(2, 2, *flags)
    final = tmp_path / "resumed.pt"
    wait_ok(start_workers(restarted, tmp_path, f"--from-step={N}",
                          f"--to-step={N + M}", f"--checkpoint={checkpoint}",
                          "--resume", f"--final={final}",
                          f"--exchange={exchange}"))
    resumed = torch.load(final)
    for name, weights in reference.items():
        assert torch.equal(resumed[name], weights), name
    # And the run did move the weights: a test that cannot fail is none.
    torch.manual_seed(7)
    assert not torch.equal(resumed["0.weight"],
                           torch.nn.Linear(64, 128).weight.detach())


def test_shards_that_did_not_keep_the_job_refuse_the_checkpoint(
        start_shards, tmp_path):
    checkpoint = tmp_path / "job.pt"
    shards = start_shards(2, 2)
    wait_ready_then_kill(start_workers(
        shards, tmp_path, "--from-step=0", f"--to-step={N}",
        f"--checkpoint={checkpoint}", hold=True))
    for shard in shards:
        shard.kill()
    # New shards without the old state: the workers start at step 0 and
    # must not mix their step-N state into a fresh job.
    fresh = start_shards(2, 2)
    workers = start_workers(fresh, tmp_path, f"--from-step={N}",
                            f"--to-step={N + M}", f"--checkpoint={checkpoint}",
                            "--resume")
    for worker in workers:
        worker.communicate(timeout=180)
        assert worker.returncode != 0
    logs = "".join(p.read_text() for p in tmp_path.glob("worker-*.log"))
    assert f"saved before step {N}" in logs
    assert "shards have this worker at step 0" in logs
