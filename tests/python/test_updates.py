"""Exchanging updates steps the wrapped optimizer a part of the parameters
at a time (gradwire/_updates.py), so the copies of the weights from before
the step cost a part's bytes, not the model's; the step must be the one
stepping everything at once would take, bit for bit."""

import copy

import pytest
import torch

from gradwire import _updates


def model():
    torch.manual_seed(3)
    return torch.nn.Sequential(
        torch.nn.Linear(40, 64), torch.nn.LayerNorm(64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def with_gradients(module, seed):
    generator = torch.Generator().manual_seed(seed)
    for p in module.parameters():
        p.grad = torch.randn(p.shape, generator=generator)
    return module


OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                      weight_decay=5e-4),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-3),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_step_in_parts_is_the_whole_step(name):
    whole, parted = model(), model()
    whole_optimizer = OPTIMIZERS[name](whole.parameters())
    parted_optimizer = OPTIMIZERS[name](parted.parameters())
    parameters = list(parted.parameters())
    own = [True] * len(parameters)
    assert len(_updates.step_parts(parted_optimizer, parameters, own)) > 1
    for step in range(3):
        with_gradients(whole, step)
        with_gradients(parted, step)
        before = [p.detach().clone() for p in whole.parameters()]
        whole_optimizer.step()
        minus_updates = [b - p.detach()
                         for b, p in zip(before, whole.parameters())]
        gradients = [p.grad for p in parameters]
        _updates._step_in_parts(parted_optimizer, parameters, own)
        for p, b, minus_u, g in zip(parameters, before, minus_updates,
                                    gradients):
            assert torch.equal(p.detach(), b), "weights not restored"
            assert torch.equal(p.grad, minus_u)
            assert p.grad is g, "-u not written into the gradient's storage"
        # Both go on from the same weights, as after an exchange.
        with torch.no_grad():
            for p, q in zip(parameters, whole.parameters()):
                p.copy_(q)
    assert str(whole_optimizer.state_dict()) == str(
        parted_optimizer.state_dict())


def test_parts_hold_a_share_of_the_elements_in_order():
    parameters = [torch.zeros(n) for n in (1000, 10, 300, 300, 300, 90, 5)]
    own = [True, True, False, True, True, True, True]
    optimizer = torch.optim.AdamW(parameters)
    parts = _updates.step_parts(optimizer, parameters, own)
    assert [i for part in parts for i in part] == list(range(7))
    budget = -(-sum(p.numel() for p, o in zip(parameters, own) if o)
               // _updates.STEP_PARTS)
    for part in parts:
        owned = [parameters[i].numel() for i in part if own[i]]
        # A part closes once it reaches the budget: only its last
        # parameter can take it past.
        assert sum(owned[:-1]) < budget


def test_an_optimizer_that_may_couple_parameters_steps_whole():
    class Clipped(torch.optim.AdamW):
        """A subclass: its step may look at every parameter at once."""

    parameters = [torch.zeros(100, requires_grad=True) for _ in range(9)]
    for optimizer in (Clipped(parameters),
                      torch.optim.LBFGS(parameters)):
        parts = _updates.step_parts(optimizer, parameters, [True] * 9)
        assert parts == [list(range(9))]


def test_a_parameter_without_a_gradient_is_not_stepped():
    module = with_gradients(model(), 0)
    parameters = list(module.parameters())
    parameters[1].grad = None
    kept = parameters[1].detach().clone()
    optimizer = torch.optim.AdamW(parameters, lr=1e-2, weight_decay=0.1)
    _updates._step_in_parts(optimizer, parameters, [True] * len(parameters))
    assert torch.equal(parameters[1].detach(), kept)
    assert torch.equal(parameters[1].grad, torch.zeros_like(kept))
    assert parameters[1] not in optimizer.state
    copy.deepcopy(optimizer.state_dict())
