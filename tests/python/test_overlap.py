"""Overlap and pull ahead from Python run on the extension's gradient hooks
and layer gate (gradwire._C.GradientHooks, gradwire._C.LayerGate), against
real shard processes."""

import time

import pytest
import torch

import gradwire
import gradwire._sync
import gradwire.torch

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
