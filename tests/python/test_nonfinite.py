"""A step whose gradients hold an infinity or NaN on one worker is skipped
on every worker, as DDP with a GradScaler skips it, instead of failing the
job; the error-feedback residual stays finite and training goes on."""

import warnings

import pytest
import torch

import gradwire.torch
from conftest import run_in_threads

STEPS = 5
BAD_STEP = 2  # Worker 0's gradient gets an infinity at this step.


def model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


def poison(gradient):
    gradient = gradient.clone()
    gradient[0, 0] = float("inf")
    return gradient


def backward(net, step, rank):
    """The step's backward pass; worker 0's first gradient at BAD_STEP gets
    an infinity as backward() makes it (what the pushes during backward
    see too), as an fp16 overflow would."""
    handle = None
    if rank == 0 and step == BAD_STEP:
        handle = next(net.parameters()).register_hook(poison)
    generator = torch.Generator().manual_seed(100 * step + rank)
    net(torch.randn(8, 16, generator=generator)).square().mean().backward()
    if handle is not None:
        handle.remove()


def snapshot(net):
    return [p.detach().clone() for p in net.parameters()]


def run(shards, make_optimizer, loop, **options):
    """Trains 2 workers; returns per worker the weights after each step,
    and the optimizers."""
    nets = [model(), model()]
    weights = [[], []]
    optimizers = [None, None]

    def work(rank):
        optimizers[rank] = gradwire.torch.DistributedOptimizer(
            make_optimizer(nets[rank]), nets[rank],
            shards=[s.address for s in shards], node_rank=rank,
            num_nodes=2, **options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for step in range(STEPS):
                loop(optimizers[rank], nets[rank], step, rank)
                weights[rank].append(snapshot(nets[rank]))

    run_in_threads(work, 2)
    return weights, optimizers


def plain_step(optimizer, net, step, rank):
    optimizer.zero_grad()
    backward(net, step, rank)
    optimizer.step()


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def sgd(net):
    return torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)


@pytest.mark.parametrize("overlap", [True, False])
def test_gradients_skip_the_step_on_every_worker(start_shards, overlap):
    shards = start_shards(1, 2)
    weights, optimizers = run(shards, sgd, plain_step, overlap=overlap,
                              compression={"dense_below": 0})
    for rank in (0, 1):
        # The bad step changed nothing, on either worker; the others did.
        assert same(weights[rank][BAD_STEP], weights[rank][BAD_STEP - 1])
        assert not same(weights[rank][BAD_STEP + 1], weights[rank][BAD_STEP])
        assert all(torch.isfinite(p).all() for p in weights[rank][-1])
        figures = optimizers[rank].metrics()
        assert figures["gradwire/skipped_steps"] == 1
        assert 0 < figures["gradwire/residual_norm"] < float("inf")
        # Momentum did not take the skipped step's gradient in.
        for state in optimizers[rank].state.values():
            assert torch.isfinite(state["momentum_buffer"]).all()
    for step in range(STEPS):
        assert same(weights[0][step], weights[1][step]), step
    for optimizer in optimizers:
        optimizer.close()


def scaler_like_step(optimizer, net, step, rank):
    """What a DDP script with torch's GradScaler does, seen from the
    optimizer: synchronize, look for an overflow in every gradient, and
    call step() only where there is none."""
    optimizer.zero_grad()
    backward(net, step, rank)
    optimizer.synchronize()
    overflow = not all(torch.isfinite(p.grad).all()
                       for p in net.parameters())
    assert overflow == (step == BAD_STEP)  # Seen on both workers.
    if not overflow:
        optimizer.step()


def test_a_grad_scaler_sees_the_overflow_on_every_worker(start_shards):
    shards = start_shards(1, 2)
    weights, optimizers = run(shards, sgd, scaler_like_step)
    for rank in (0, 1):
        assert same(weights[rank][BAD_STEP], weights[rank][BAD_STEP - 1])
        assert not same(weights[rank][-1], weights[rank][BAD_STEP])
    assert same(weights[0][-1], weights[1][-1])
    for optimizer in optimizers:
        optimizer.close()


def test_updates_leave_out_the_worker_whose_gradients_overflowed(
        start_shards):
    shards = start_shards(1, 2)

    def adam(net):
        return torch.optim.Adam(net.parameters(), lr=0.01)

    weights, optimizers = run(shards, adam, plain_step,
                              exchange="updates")
    for step in range(STEPS):
        assert same(weights[0][step], weights[1][step]), step
    # Worker 1's update still counted at the bad step.
    assert not same(weights[0][BAD_STEP], weights[0][BAD_STEP - 1])
    for rank in (0, 1):
        for state in optimizers[rank].state.values():
            assert torch.isfinite(state["exp_avg_sq"]).all()
        assert all(torch.isfinite(p).all() for p in weights[rank][-1])
    # Worker 0's Adam skipped a step: one count fewer than worker 1's.
    steps = [int(next(iter(o.state.values()))["step"]) for o in optimizers]
    assert steps == [STEPS - 1, STEPS]
    for optimizer in optimizers:
        optimizer.close()


def test_a_script_may_still_refuse_them(start_shards):
    shards = start_shards(1, 1)
    net = model()
    optimizer = gradwire.torch.DistributedOptimizer(
        sgd(net), net, shards=[s.address for s in shards], node_rank=0,
        num_nodes=1, overlap=False,
        compression={"dense_below": 0, "non_finite": "reject"})
    for step in range(BAD_STEP):
        plain_step(optimizer, net, step, 0)
    optimizer.zero_grad()
    backward(net, BAD_STEP, 0)
    with pytest.raises(ValueError, match="non-finite gradient value inf"):
        optimizer.step()
    optimizer.close()
