"""A job whose shards hold more than one message each, under `gradwire run`
with the shards' --max-message-bytes set small for the test: the Init's
values travel in parts, pushes and pull answers in several messages, and
training reaches the same weights, bit for bit, as with one message each.
And a model whose state the shards' --memory-limit-bytes cannot hold is
refused at start-up, naming the sizes and the flag. GRADWIRE_STATS_JSON
writes each worker's figures at exit."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = pathlib.Path(os.environ.get("GRADWIRE_CLI_BIN")
                   or ROOT / "build" / "bin" / "gradwire")
PYTHONPATH = os.environ.get("PYTHONPATH") or str(ROOT / "build" / "python")
PYTHON = "/usr/bin/python3"
# Each shard holds about 24 KB of weights in 3 tensors of 8 KB: at 16 KB a
# message, each shard's Init comes in 2 parts, and its dense pushes and
# pull answers in 2 messages.
SMALL_MESSAGES = "--max-message-bytes=16384"

SCRIPT = """
import hashlib, json, sys
import torch
import gradwire
import gradwire.torch as gt

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(44, 44, bias=False)
                              for _ in range(6)])
optimizer = gt.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), model,
    compression=gradwire.Compression(sys.argv[2], dense_below=0))
data = torch.Generator().manual_seed(1 + gradwire.rank())
for step in range(3):
    optimizer.zero_grad()
    x = torch.randn(8, 44, generator=data)
    model(x).pow(2).mean().backward()
    optimizer.step()
digest = hashlib.sha256(b"".join(
    p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
stats = optimizer.stats
with open(sys.argv[1].format(rank=gradwire.rank()), "w") as f:
    json.dump({"digest": digest, "pushed": stats.pushed_bytes}, f)
optimizer.close()
"""


def run_job(tmp_path, name, compression, server_args):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    out = tmp_path / f"{name}-{{rank}}.json"
    stats = tmp_path / f"{name}-stats-{{rank}}.json"
    env = dict(os.environ, PYTHONPATH=PYTHONPATH,
               GRADWIRE_STATS_JSON=str(stats))
    env.pop("GRADWIRE_COMPRESSION", None)
    command = [str(CLI), "run", "-n", "2", "--shards", "2"]
    if server_args:
        command.append(f"--server-args={server_args}")
    result = subprocess.run(
        command + ["--", PYTHON, str(script), str(out), compression],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    summaries = []
    if result.returncode == 0:
        for rank in range(2):
            summary = json.loads(
                pathlib.Path(str(out).format(rank=rank)).read_text())
            # GRADWIRE_STATS_JSON: the optimizer's figures at exit.
            summary["stats"] = json.loads(
                pathlib.Path(str(stats).format(rank=rank)).read_text())
            summaries.append(summary)
    return result, summaries


@pytest.mark.parametrize("compression", ["none", "topk"])
def test_small_messages_train_to_the_same_weights(tmp_path, compression):
    whole, reference = run_job(tmp_path, "whole", compression, "")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    parts, split = run_job(tmp_path, "parts", compression, SMALL_MESSAGES)
    assert parts.returncode == 0, parts.stdout + parts.stderr
    # Both ranks hold the same model, and the same as with whole messages.
    assert split[0]["digest"] == split[1]["digest"]
    assert split[0]["digest"] == reference[0]["digest"]
    # A shard refuses any message over 16 KB, so the job's success means
    # that each shard's Init (24 KB of values) went in parts and, with
    # "none", every dense pull answer in rounds. Each dense push went as
    # two, a header more.
    for rank in range(2):
        figures = split[rank]["stats"]
        assert figures["rank"] == rank and figures["steps"] == 3
        assert figures["pushed_bytes"] == split[rank]["pushed"]
        assert figures["startup_seconds"] > 0
        assert 0 < figures["exchange_seconds"] < 60
        assert split[rank]["pushed"] >= reference[rank]["pushed"]
        assert split[rank]["pushed"] < reference[rank]["pushed"] * 1.01
        if compression == "none":
            assert split[rank]["pushed"] > reference[rank]["pushed"]


def test_a_model_the_shards_cannot_hold_is_refused_at_start_up(tmp_path):
    # About 5,800 elements per shard at 8 bytes (weights, the BSP step's
    # sum; optimizer MEAN keeps no pull shadow): 46 KB, over 64 KB less two
    # 16 KB messages.
    result, _ = run_job(tmp_path, "refused", "topk",
                        f"{SMALL_MESSAGES} --memory-limit-bytes=65536")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "--memory-limit-bytes" in output, output
    assert "8 bytes per element" in output, output
    assert "more shards" in output, output
