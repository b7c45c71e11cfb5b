"""DistributedOptimizer broadcasts the model's buffers (BatchNorm running
statistics) from worker 0 at every step, as DDP does: tested on ResNet-18
with 2 workers fed different data, whose own running statistics would
differ."""

import threading

import pytest
import torch
import torchvision

import gradwire
import gradwire.torch
from conftest import run_in_threads

STEPS = 3


def resnet():
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10)


def train(shards, broadcast_buffers):
    """Per step, each worker's floating-point buffers, as lists."""
    barrier = threading.Barrier(2)
    seen = [[None] * STEPS for _ in range(2)]

    def work(rank):
        model = resnet()
        optimizer = gradwire.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), model,
            broadcast_buffers=broadcast_buffers,
            shards=[s.address for s in shards], node_rank=rank,
            num_nodes=2)
        generator = torch.Generator().manual_seed(rank)
        for step in range(STEPS):
            x = torch.randn(4, 3, 32, 32, generator=generator) * (rank + 1)
            y = torch.randint(0, 10, (4,), generator=generator)
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            seen[rank][step] = [b.clone() for _, b in model.named_buffers()
                                if b.is_floating_point()]
            barrier.wait(timeout=60)
        optimizer.close()

    torch.set_num_threads(1)
    run_in_threads(work, 2, timeout=300)
    return seen


def test_buffers_are_worker_zeros_on_every_worker(start_shards):
    seen = train(start_shards(1, 2), broadcast_buffers=None)
    for step in range(STEPS):
        assert len(seen[0][step]) == 40  # 20 BatchNorms: mean and var.
        for a, b in zip(seen[0][step], seen[1][step]):
            assert torch.equal(a, b), f"step {step}"
    # They are trained statistics, not the initial zeros and ones.
    assert seen[0][-1][0].abs().sum() > 0


def test_without_broadcast_each_worker_keeps_its_own(start_shards):
    seen = train(start_shards(1, 2), broadcast_buffers=False)
    assert any(not torch.equal(a, b)
               for a, b in zip(seen[0][-1], seen[1][-1]))


def test_broadcast_needs_the_model(start_shards):
    shards = start_shards(1, 1)
    model = resnet()
    with pytest.raises(ValueError, match="broadcast_buffers: pass the model"):
        gradwire.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1),
            model.named_parameters(), broadcast_buffers=True,
            shards=[shards[0].address])


class Masked(torch.nn.Module):
    """A layer with a causal mask of -inf, as GPT scripts keep it."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 4)
        self.register_buffer("mask",
                             torch.full((4, 4), float("-inf")).triu(1))

    def forward(self, x):
        return torch.softmax(self.linear(x) + self.mask, dim=-1)


def test_a_constant_non_finite_buffer_is_left_alone(start_shards):
    shards = start_shards(1, 1)
    model = Masked()
    optimizer = gradwire.torch.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), model,
        shards=[shards[0].address])
    mask = model.mask.clone()
    for _ in range(2):
        optimizer.zero_grad()
        model(torch.randn(4, 4)).pow(2).sum().backward()
        optimizer.step()
    assert torch.equal(model.mask, mask)
    assert optimizer.next_step == 2

    model.mask[0, 0] = 5.0  # no longer the constant it was taken for
    optimizer.zero_grad()
    model(torch.randn(4, 4)).pow(2).sum().backward()
    with pytest.raises(gradwire.Error, match="buffer mask held a non-finite"):
        optimizer.step()
    optimizer.close()
