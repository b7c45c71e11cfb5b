"""DistributedOptimizer.state_dict() carries this worker's compression
state; load_state_dict() refuses a state of another job, worker or step
with an error naming what differs, and changes nothing then."""

import pytest
import torch

import gradwire
import gradwire.torch
from conftest import run_in_threads


def model(width=16):
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, 2))


def make(shards, rank, net, num_nodes=2):
    # Every parameter compressed (this model's are all small), so that
    # error feedback keeps a residual.
    return gradwire.torch.DistributedOptimizer(
        torch.optim.Adam(net.parameters(), lr=1e-2), net,
        compression={"dense_below": 0},
        shards=[s.address for s in shards], node_rank=rank,
        num_nodes=num_nodes)


def one_step(optimizer, net, rank):
    generator = torch.Generator().manual_seed(rank)
    optimizer.zero_grad()
    net(torch.randn(4, 8, generator=generator)).square().sum().backward()
    optimizer.step()


def test_state_dicts_are_checked(start_shards):
    shards = start_shards(1, 2)
    states = [None, None]
    optimizers = [None, None]
    nets = [model(), model()]

    def work(rank):
        optimizers[rank] = make(shards, rank, nets[rank])
        one_step(optimizers[rank], nets[rank], rank)
        states[rank] = optimizers[rank].state_dict()

    run_in_threads(work, 2)
    mine = states[0]
    assert mine["gradwire"]["next_step"] == 1
    assert isinstance(mine["gradwire"]["worker_state"], bytes)
    # Top-K 1% of 16x8 keeps 64 of 128: a residual remains to be saved.
    assert len(mine["gradwire"]["worker_state"]) > 4 * 128

    with pytest.raises(ValueError, match="worker 1's, not worker 0's"):
        optimizers[0].load_state_dict(states[1])
    with pytest.raises(ValueError, match="no 'gradwire' entry"):
        optimizers[0].load_state_dict(optimizers[0]._optimizer.state_dict())
    broken = dict(mine, gradwire=dict(mine["gradwire"], worker_state=b"x"))
    with pytest.raises(ValueError, match="not a gradwire WorkerState"):
        optimizers[0].load_state_dict(broken)
    # The same worker's own state at the step it is at loads.
    optimizers[0].load_state_dict(mine)

    def advance(rank):
        one_step(optimizers[rank], nets[rank], rank)

    run_in_threads(advance, 2)
    with pytest.raises(gradwire.Error, match="saved before step 1, but the "
                       "shards have this worker at step 2"):
        optimizers[0].load_state_dict(mine)
    for optimizer in optimizers:
        optimizer.close()


def test_a_state_of_another_model_is_refused(start_shards):
    shards = start_shards(1, 1)
    wide = model(width=32)
    saved = make(shards, 0, wide, num_nodes=1).state_dict()
    other_shards = start_shards(1, 1)
    narrow = model(width=16)
    optimizer = make(other_shards, 0, narrow, num_nodes=1)
    with pytest.raises(ValueError, match="another model"):
        optimizer.load_state_dict(saved)


def test_a_state_with_another_number_of_chunks_is_refused(start_shards):
    shards = start_shards(1, 1)
    deep = torch.nn.Sequential(model(), torch.nn.Linear(2, 2))
    saved = make(shards, 0, deep, num_nodes=1).state_dict()
    other_shards = start_shards(1, 1)
    optimizer = make(other_shards, 0, model(), num_nodes=1)
    # Each model's tensors and the skip flag's one chunk.
    with pytest.raises(ValueError, match="it has 7 chunks where this worker "
                       "has 5"):
        optimizer.load_state_dict(saved)


def test_parameter_sync_state_dict_round_trips(start_shards):
    shards = start_shards(1, 1)
    net = model()
    sync = gradwire.ParameterSync(
        shards=[shards[0].address], compression={"compressor": "topk",
                                                 "ratio": 0.1},
        optimizer="sgd", lr=0.1)
    sync.register(net.named_parameters(), overlap=False)
    net(torch.randn(4, 8)).square().sum().backward()
    sync.step()
    saved = sync.state_dict()
    assert saved["gradwire"]["next_step"] == 1
    sync.close()
    # A restarted worker: the shards resume it at step 1, and its residuals
    # come back from the state dict.
    again = gradwire.ParameterSync(
        shards=[shards[0].address], compression={"compressor": "topk",
                                                 "ratio": 0.1},
        optimizer="sgd", lr=0.1)
    again.register(model().named_parameters(), overlap=False)
    assert again.next_step == 1
    again.load_state_dict(saved)
    assert again.state_dict() == saved
    with pytest.raises(ValueError, match="no 'gradwire' entry"):
        again.load_state_dict({})
    again.close()
