"""Overlap and pull ahead from Python run on the extension's gradient hooks
and layer gate (gradwire._C.GradientHooks, gradwire._C.LayerGate), against
real shard processes; and a local group's DistributedOptimizer, which
exchanges whole steps, leaves overlap off unless asked."""

import json
import os
import pathlib
import subprocess
import time

import pytest
import torch

import gradwire
import gradwire._sync
import gradwire.torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = pathlib.Path(os.environ.get("GRADWIRE_CLI_BIN")
                   or ROOT / "build" / "bin" / "gradwire")
PYTHONPATH = os.environ.get("PYTHONPATH") or str(ROOT / "build" / "python")
PYTHON = "/usr/bin/python3"

OPTIONS = dict(compressor="topk", ratio=0.05, value_type="fp16",
               optimizer="sgd", lr=0.1, partition_bytes=4096)


def make_model(seed=1, middle=None):
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(32, 64), torch.nn.ReLU()]
    if middle is not None:
        layers.append(middle)
    layers.append(torch.nn.Linear(64, 4))
    return torch.nn.Sequential(*layers)


def loss_of(model, step=0):
    generator = torch.Generator().manual_seed(step)
    points = torch.randn(16, 32, generator=generator)
    return torch.nn.functional.cross_entropy(model(points),
                                             points[:, :4].argmax(1))


def pushed_bytes(shard):
    return shard.metric_sum("gradwire_shard_received_bytes_total", rpc="push")


class PushWatch(torch.nn.Module):
    """The identity; its backward, which runs once the layers above it have
    their gradients and before those below, waits (up to 20 s) until the
    shard has received a push, and records the bytes it saw."""

    def __init__(self, shard):
        super().__init__()
        self.shard = shard
        self.seen = []

    def forward(self, x):
        return _Watch.apply(x, self)


class _Watch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, watch):
        ctx.watch = watch
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        deadline = time.monotonic() + 20
        received = pushed_bytes(ctx.watch.shard)
        while received == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
            received = pushed_bytes(ctx.watch.shard)
        ctx.watch.seen.append(received)
        return grad, None


def test_the_hooks_and_the_gate_are_the_extensions(start_shards):
    assert not hasattr(gradwire._sync, "_GradientHooks")
    assert not hasattr(gradwire._sync, "_LayerGate")
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
    model = make_model()
    sync.register(model.named_parameters(), overlap=True)
    assert isinstance(sync._hooks, gradwire._C.GradientHooks)
    sync.close()


@pytest.mark.parametrize("overlap", [True, False])
def test_the_last_layers_are_pushed_during_backward(start_shards, overlap):
    """With overlap, the shard receives the last layer's push while
    backward() still computes the first layer's gradient; without it,
    nothing before step()."""
    shards = start_shards(1, 1)
    watch = PushWatch(shards[0]) if overlap else None
    model = make_model(middle=watch)
    sync = gradwire.ParameterSync(shards=[shards[0].address],
                                  push_bucket_bytes=0, **OPTIONS)
    sync.register(model.named_parameters(), overlap=overlap)
    loss_of(model).backward()
    after_backward = pushed_bytes(shards[0])
    sync.step()
    if overlap:
        assert watch.seen and watch.seen[0] > 0
    else:
        assert after_backward == 0
    assert pushed_bytes(shards[0]) > 0
    sync.close()


def test_accumulated_passes_give_the_weights_of_one_push(start_shards):
    """Two backward passes per step, pushed during the second, give the
    weights of the same passes pushed by step()."""
    results = []
    for overlap in (True, False):
        shards = start_shards(1, 1)
        model = make_model()
        sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
        sync.register(model.named_parameters(), overlap=overlap,
                      backward_passes_per_step=2)
        for step in range(3):
            model.zero_grad()
            loss_of(model, 2 * step).backward()
            loss_of(model, 2 * step + 1).backward()
            sync.step()
        results.append([p.detach().clone() for p in model.parameters()])
        sync.close()
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_a_backward_pass_too_many_raises_from_backward(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
    model = make_model()
    sync.register(model.named_parameters(), overlap=True,
                  backward_passes_per_step=2)
    loss_of(model).backward()
    loss_of(model).backward()
    with pytest.raises(gradwire.Error,
                       match="FAILED_PRECONDITION: .* got 3 backward passes"):
        loss_of(model).backward()
    sync.close()


def test_a_bad_backward_passes_per_step_changes_nothing(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
    model = make_model()
    with pytest.raises(ValueError, match="^backward_passes_per_step: 0"):
        sync.register(model.named_parameters(), backward_passes_per_step=0)
    assert sync._hooks is None
    loss_of(model).backward()  # No hook left behind.
    sync.register(model.named_parameters())
    sync.step()
    assert sync.next_step == 1
    sync.close()


def test_a_replaced_parameter_raises_value_error_from_backward(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
    model = make_model()
    sync.register(model.named_parameters(), overlap=True)
    model[0].weight.data = model[0].weight.data.clone()
    with pytest.raises(ValueError, match="changed since register"):
        loss_of(model).backward()
    sync.close()


def test_close_takes_the_hooks_off(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
    model = make_model()
    sync.register(model.named_parameters(), overlap=True)
    sync.pull_ahead(model)
    sync.close()
    # Hooks left on would raise "ParameterSync is closed".
    loss_of(model).backward()
    assert all(not m._forward_pre_hooks for m in model.modules())


def test_hooks_outliving_their_python_sync_still_push(start_shards):
    """The hooks hold the sync they push to: dropping the Python object
    without close() leaves hooks that still find it."""
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
    model = make_model()
    sync.register(model.named_parameters(), overlap=True)
    hooks = sync._hooks
    del sync
    loss_of(model).backward()
    hooks.finish_step()
    hooks.remove()


def test_distributed_optimizer_pushes_through_the_extensions_hooks(
        start_shards):
    shards = start_shards(1, 1)
    model = make_model()
    optimizer = gradwire.torch.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), model,
        shards=[shards[0].address])
    assert isinstance(optimizer._hooks, gradwire._C.GradientHooks)
    loss_of(model).backward()
    optimizer.step()
    assert optimizer.next_step == 1
    # Clipping after the push is refused, naming the parameter.
    optimizer.zero_grad()
    loss_of(model, 1).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-4)
    with pytest.raises(gradwire.Error, match="gradient of 0.weight changed"):
        optimizer.step()
    optimizer.close()


# A rank of a local group: a default DistributedOptimizer, or one with
# overlap=True (argv[2] "on"), trains 3 steps on data of its own rank and
# writes what it ended with to argv[1] ("{rank}" replaced).
LOCAL_GROUP_SCRIPT = """
import json, sys
import torch
import gradwire
import gradwire.torch as gt

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 4))
initial = [p.detach().clone() for p in model.parameters()]
overlap = {"overlap": True} if sys.argv[2] == "on" else {}
optimizer = gt.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.1), model, **overlap)
data = torch.Generator().manual_seed(1 + gradwire.rank())
for step in range(3):
    optimizer.zero_grad()
    model(torch.randn(16, 32, generator=data)).pow(2).mean().backward()
    optimizer.step()
with open(sys.argv[1].format(rank=gradwire.rank()), "w") as f:
    json.dump({"local_size": gradwire.local_size(),
               "hooks": optimizer._hooks is not None,
               "steps": optimizer.next_step,
               "moved": any(not torch.equal(a, p)
                            for a, p in zip(initial, model.parameters())),
               "weights": [p.detach().flatten().tolist()
                           for p in model.parameters()]}, f)
optimizer.close()
"""


def run_local_group(tmp_path, shard, *args, script=None, compression=None):
    """Two workers as one node's local group under `gradwire run
    --nnodes 1 -n 2`, joining `shard` (which counts one worker: the
    node): each runs `script` (LOCAL_GROUP_SCRIPT by default) with an
    output path ("{rank}" in it) and `args`, with GRADWIRE_COMPRESSION
    set to `compression` or unset. The run's result and each rank's JSON
    (None where missing)."""
    if script is None:
        script = tmp_path / "local_group.py"
        script.write_text(LOCAL_GROUP_SCRIPT)
    out = tmp_path / "rank-{rank}.json"
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    env.pop("GRADWIRE_COMPRESSION", None)
    if compression:
        env["GRADWIRE_COMPRESSION"] = compression
    result = subprocess.run(
        [str(CLI), "run", "--nnodes", "1", "-n", "2", "--shard-addresses",
         shard.address, "--run-dir", str(tmp_path / "run"), "--", PYTHON,
         str(script), str(out), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    ranks = []
    for rank in range(2):
        path = pathlib.Path(str(out).format(rank=rank))
        ranks.append(json.loads(path.read_text()) if path.exists() else None)
    return result, ranks


def test_a_local_group_trains_with_overlap_off_by_default(start_shards,
                                                          tmp_path):
    """In a local group (LOCAL_WORLD_SIZE 2, GRADWIRE_LOCAL_STORE, as
    `gradwire run --nnodes 1` sets them) a DistributedOptimizer given no
    overlap exchanges whole steps: it has no gradient hooks, and its
    ranks, on data of their own, train to the same weights. With overlap
    on by default, the first backward() would raise "overlap needs
    local_size 1" and the run fail."""
    result, ranks = run_local_group(tmp_path, start_shards(1, 1)[0],
                                    "default")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    for rank in ranks:
        assert rank["local_size"] == 2
        assert not rank["hooks"]
        assert rank["steps"] == 3
        assert rank["moved"]
    assert ranks[0]["weights"] == ranks[1]["weights"]


def test_overlap_asked_for_in_a_local_group_fails_naming_why(start_shards,
                                                             tmp_path):
    """overlap=True in a local group is refused when the optimizer is
    made, before anything connects, with the reason and the fix, and the
    run fails."""
    result, ranks = run_local_group(tmp_path, start_shards(1, 1)[0], "on")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert ("ValueError: overlap: this process is one of a node's 2 local "
            "ranks") in output, output[-3000:]
    assert "use overlap=False" in output
    assert ranks == [None, None]
