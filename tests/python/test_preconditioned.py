"""DistributedOptimizer's exchange="preconditioned" (Adam and AdamW) against
real shard processes: dense exact gradients for freeze_step steps, then
each worker's gradient divided by the frozen Adam denominator, compressed
with error feedback, and the optimizer's rule with v frozen."""

import copy
import math

import pytest
import torch

from conftest import run_in_threads
from gradwire.torch import DistributedOptimizer

from test_distributed_optimizer import top_k_with_feedback
from test_parameter_sync import batch, make_model

STEPS = 8
FREEZE = 3
BETAS = (0.9, 0.95)
EPS = 1e-8
WEIGHT_DECAY = 0.1
TOP_K = {"compressor": "topk", "ratio": 0.1, "min_kept": 1,
         "dense_below": 0}
NONE = {"compressor": "none"}


def make_optimizer(model, kind):
    return kind(model.parameters(), lr=0.01, betas=BETAS, eps=EPS,
                weight_decay=WEIGHT_DECAY)


def loss_of(model, step, worker):
    points, labels = batch(step, worker)
    return torch.nn.functional.cross_entropy(model(points), labels)


def train_distributed(shards, kind, compression, optimizers=None):
    """Two workers through gradwire; returns their models, their wrapped
    optimizers' state dicts and the first worker's initial model."""
    models = [make_model(seed=w + 1) for w in range(2)]
    initial, states = [None, None], [None, None]

    def work(worker):
        model = models[worker]
        opt = DistributedOptimizer(
            make_optimizer(model, kind), model, compression=compression,
            exchange="preconditioned", freeze_step=FREEZE,
            shards=[s.address for s in shards], node_rank=worker,
            num_nodes=2)
        initial[worker] = copy.deepcopy(model)
        scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=3,
                                                    gamma=0.5)
        for step in range(STEPS):
            opt.zero_grad()
            loss_of(model, step, worker).backward()
            opt.step()
            scheduler.step()
        states[worker] = opt.state_dict()
        opt.close()

    run_in_threads(work, 2)
    return models, states, initial[0]


def frozen_step(p, gradient, state, denominator, lr, decoupled,
                velocity=0.0):
    """Adam's or AdamW's step with the second moment frozen, written out;
    with a `velocity` momentum, (1 - velocity) times the mean sent
    velocity is the first moment."""
    if decoupled:
        p.mul_(1 - lr * WEIGHT_DECAY)
    else:
        gradient = gradient + WEIGHT_DECAY * p
    state["step"] += 1
    if velocity:
        p.sub_(lr * (1 - velocity) * gradient / denominator)
        return
    state["exp_avg"].mul_(BETAS[0]).add_(gradient, alpha=1 - BETAS[0])
    correction = 1 - BETAS[0] ** float(state["step"])
    p.sub_(lr / correction * state["exp_avg"] / denominator)


@torch.no_grad()
def train_reference(initial, kind, compress, velocity=0.0):
    """One process: the workers' mean gradient into the optimizer for
    FREEZE steps; then each worker's gradient times lr over the first lr,
    divided by the denominator at the freeze, through `compress(x, worker,
    index)`, averaged, turned back, and the frozen rule."""
    model = copy.deepcopy(initial)
    opt = make_optimizer(model, kind)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    base_lr = opt.param_groups[0]["lr"]
    params = list(model.parameters())
    denominators = None
    for step in range(STEPS):
        grads = []
        for worker in range(2):
            replica = copy.deepcopy(model)
            with torch.enable_grad():
                loss_of(replica, step, worker).backward()
            grads.append([p.grad for p in replica.parameters()])
        lr = opt.param_groups[0]["lr"]
        if step < FREEZE:
            for p, *gs in zip(params, *grads):
                p.grad = torch.stack(gs).mean(0)
            opt.step()
        else:
            if denominators is None:
                denominators = [
                    opt.state[p]["exp_avg_sq"].sqrt()
                    / math.sqrt(1 - BETAS[1] ** FREEZE) + EPS
                    for p in params]
            scale = lr / base_lr
            for index, (p, d) in enumerate(zip(params, denominators)):
                sent = [compress(grads[w][index] * scale / d, w, index)
                        for w in range(2)]
                mean = torch.stack(sent).mean(0) / scale * d
                frozen_step(p, mean, opt.state[p], d, lr,
                            kind is torch.optim.AdamW, velocity)
        scheduler.step()
    return model


def top_k_compressor():
    residuals = {}

    def compress(x, worker, index):
        residual = residuals.setdefault((worker, index), torch.zeros_like(x))
        return top_k_with_feedback(x, residual, 0.1, 1)
    return compress


@pytest.mark.parametrize("kind", [torch.optim.AdamW, torch.optim.Adam])
@pytest.mark.parametrize("compression", ["none", "topk"])
def test_dense_steps_then_the_frozen_rule_on_preconditioned_pushes(
        start_shards, kind, compression):
    """Top-K selects among the preconditioned gradients (the steps), not
    the raw ones: the reference compresses g / denominator, and any other
    order of scaling and selection keeps other elements."""
    shards = start_shards(2, 2)
    topk = compression == "topk"
    models, _, initial = train_distributed(shards, kind,
                                           TOP_K if topk else NONE)
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)
    reference = train_reference(
        initial, kind, top_k_compressor() if topk else (lambda x, w, i: x))
    for a, b in zip(models[0].parameters(), reference.parameters()):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


def test_a_velocity_compressor_applies_its_mean_as_the_first_moment(
        start_shards):
    """DGC's momentum correction at ratio 1 sends its whole velocity and
    clears it (masking), so each push is this step's preconditioned
    gradient, and the step is (1 - momentum) times their mean over the
    frozen denominator."""
    shards = start_shards(2, 2)
    dgc = {"compressor": "dgc", "ratio": 1.0, "dgc_momentum": 0.5,
           "value_type": "fp32", "dense_below": 0}
    models, _, initial = train_distributed(shards, torch.optim.AdamW, dgc)
    reference = train_reference(initial, torch.optim.AdamW,
                                 lambda x, w, i: x, velocity=0.5)
    for a, b in zip(models[0].parameters(), reference.parameters()):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


def test_the_freeze_is_in_the_state_dict(start_shards):
    """The frozen step travels with the optimizer's state, in torch's
    layout: a plain AdamW loads it, and v stayed as it was at the freeze."""
    shards = start_shards(1, 2)
    models, states, _ = train_distributed(shards, torch.optim.AdamW, TOP_K)
    state = states[0]
    assert "gradwire" in state
    for entry in state["state"].values():
        assert entry["frozen_step"] == FREEZE
        assert float(entry["step"]) == STEPS
    plain = make_optimizer(models[0], torch.optim.AdamW)
    state.pop("gradwire")
    plain.load_state_dict(state)
    assert float(plain.state[next(models[0].parameters())]["step"]) == STEPS


def test_bad_choices_are_refused():
    model = make_model(seed=1)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="Adam or AdamW"):
        DistributedOptimizer(sgd, model, exchange="preconditioned",
                             shards=["127.0.0.1:1"])
    amsgrad = torch.optim.AdamW(model.parameters(), amsgrad=True)
    with pytest.raises(ValueError, match="amsgrad"):
        DistributedOptimizer(amsgrad, model, exchange="preconditioned",
                             shards=["127.0.0.1:1"])
    adam = torch.optim.Adam(model.parameters())
    decaying = torch.optim.Adam(model.parameters(), weight_decay=0.1)
    with pytest.raises(ValueError, match="use AdamW"):
        DistributedOptimizer(decaying, model, exchange="preconditioned",
                             compression={"compressor": "dgc",
                                          "dgc_momentum": 0.9},
                             shards=["127.0.0.1:1"])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="^freeze_step"):
            DistributedOptimizer(adam, model, exchange="preconditioned",
                                 freeze_step=bad, shards=["127.0.0.1:1"])


def test_gradwire_freeze_step_sets_the_default(start_shards, monkeypatch):
    shards = start_shards(1, 1)
    model = make_model(seed=1)
    monkeypatch.setenv("GRADWIRE_FREEZE_STEP", "ten")
    with pytest.raises(ValueError, match="^GRADWIRE_FREEZE_STEP: 'ten'"):
        DistributedOptimizer(make_optimizer(model, torch.optim.AdamW), model,
                             exchange="preconditioned",
                             shards=[shards[0].address])
    monkeypatch.setenv("GRADWIRE_FREEZE_STEP", "7")
    opt = DistributedOptimizer(make_optimizer(model, torch.optim.AdamW),
                               model, exchange="preconditioned",
                               shards=[shards[0].address])
    assert opt.freeze_step == 7
    opt.close()
