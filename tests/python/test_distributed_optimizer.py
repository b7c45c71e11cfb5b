"""gradwire.torch.DistributedOptimizer against real shard processes: the
shards aggregate, a local torch optimizer steps on the mean gradient."""

import copy

import pytest
import torch

import gradwire
from conftest import run_in_threads
from gradwire.torch import DistributedOptimizer

from test_parameter_sync import batch, make_model

STEPS = 8
# Compressor "none" is lossless both ways (fp32 pushes whatever value_type
# says, dense pulls): the exchanged gradient is the exact mean, so the
# result must match one process stepping on the averaged gradient.
EXACT = dict(compression={"compressor": "none", "value_type": "fp16"})


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)


def train_distributed(shards, num_workers, clip, **options):
    models = [make_model(seed=w + 1) for w in range(num_workers)]
    lrs = [None] * num_workers
    initial = [None] * num_workers

    def work(worker):
        model = models[worker]
        opt = DistributedOptimizer(
            make_optimizer(model), named_parameters=model.named_parameters(),
            shards=[s.address for s in shards], node_rank=worker,
            num_nodes=num_workers, **options)
        initial[worker] = copy.deepcopy(model)
        scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=3,
                                                    gamma=0.5)
        for step in range(STEPS):
            points, labels = batch(step, worker)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(points),
                                              labels).backward()
            if clip:
                opt.synchronize()
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            scheduler.step()
        lrs[worker] = opt.param_groups[0]["lr"]
        opt.close()

    run_in_threads(work, num_workers)
    return models, lrs, initial


def top_k_with_feedback(gradient, residual, ratio, min_kept):
    """What a worker pushes for one tensor (one chunk): Top-K of g + r by
    magnitude, the values rounded to fp16, the rest kept in r."""
    total = residual + gradient
    flat = total.flatten()
    k = min(flat.numel(), max(min_kept, round(ratio * flat.numel())))
    kept = flat.abs().topk(k).indices
    sent = torch.zeros_like(flat)
    sent[kept] = flat[kept].half().float()
    residual.copy_(total - sent.view_as(total))
    return sent.view_as(total)


def train_reference(model, num_workers, clip, compress=None):
    """One process: the mean of the workers' gradients (each through
    `compress(gradient, worker, index, scale)` when given, scale being the
    learning rate over the first one), the same optimizer, scheduler and
    clipping, from the same initial weights."""
    opt = make_optimizer(model)
    base_lr = opt.param_groups[0]["lr"]
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    for step in range(STEPS):
        grads = []
        for worker in range(num_workers):
            replica = copy.deepcopy(model)
            points, labels = batch(step, worker)
            torch.nn.functional.cross_entropy(replica(points),
                                              labels).backward()
            grads.append([p.grad for p in replica.parameters()])
        if compress is not None:
            scale = opt.param_groups[0]["lr"] / base_lr
            grads = [[compress(g, worker, index, scale)
                      for index, g in enumerate(gs)]
                     for worker, gs in enumerate(grads)]
        for p, *gs in zip(model.parameters(), *grads):
            p.grad = torch.stack(gs).mean(0)
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        scheduler.step()
    return model


@pytest.mark.parametrize("clip", [None, 0.5])
def test_matches_one_process_on_the_mean_gradient(start_shards, clip):
    shards = start_shards(2, 2)
    models, lrs, initial = train_distributed(shards, 2, clip, **EXACT)
    # Every worker started from the first Init's weights, whoever sent it.
    for a, b in zip(initial[0].parameters(), initial[1].parameters()):
        assert torch.equal(a, b)
    reference = train_reference(initial[0], 2, clip)
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)
    # Bit for bit: the shards hand on the mean they formed, 0.5 * a + 0.5 *
    # b, which is (a + b) / 2 in float (halving is exact).
    for a, b in zip(models[0].parameters(), reference.parameters()):
        assert torch.equal(a, b), (a - b).abs().max()
    # The scheduler halved the rate twice (steps 3 and 6).
    assert lrs == [0.05, 0.05]


@pytest.mark.parametrize("compression", ["none", "topk"])
def test_gradients_are_where_the_means_land(start_shards, compression):
    """Exchanging gradients with exact pulls, the shards hand each step's
    mean on whole, and from the start each parameter's gradient is the
    tensor it lands in, which backward() accumulates into: the worker
    keeps no replica of the shards' weights, no copy of them from before
    the step, and no gradient of backward's own beside them."""
    shards = start_shards(1, 1)
    model = make_model(seed=1)
    opt = DistributedOptimizer(
        make_optimizer(model), named_parameters=model.named_parameters(),
        shards=[s.address for s in shards],
        compression=gradwire.Compression(compression))
    assert opt._means and opt._before is None
    registered = {id(p): r for p, r in zip(model.parameters(), opt._replicas)}
    for p in model.parameters():
        assert p.grad.data_ptr() == registered[id(p)].data_ptr()
        assert not p.grad.any()
    for step in range(3):
        points, labels = batch(step, 0)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(points), labels).backward()
        expected = [p.grad.clone() for p in model.parameters()]
        for p in model.parameters():
            assert p.grad.data_ptr() == registered[id(p)].data_ptr()
        opt.step()
        for p, g in zip(model.parameters(), expected):
            assert p.grad.data_ptr() == registered[id(p)].data_ptr()
            if compression == "none":
                # One worker: its own gradient, exactly.
                assert torch.equal(p.grad, g)
    opt.close()


@pytest.mark.parametrize("dense_below", [0, 1000])
def test_exact_pulls_bring_the_mean_of_the_compressed_pushes(start_shards,
                                                             dense_below):
    """Top-K 10% pushes, exact pulls (DistributedOptimizer's default): the
    wrapped optimizer steps on the mean of exactly what the workers sent,
    not on a second compression of it (the delta pulls would be Top-K of
    the mean at 10%, rounded to fp16). Parameters of fewer than
    dense_below elements (here the biases) are sent whole, at fp32. What
    error feedback holds back is in units of the update: each gradient is
    pushed times the learning rate over the first one (the scheduler
    halves it), and the mean divided by it."""
    shards = start_shards(2, 2)
    compression = {"compressor": "topk", "ratio": 0.1, "min_kept": 1,
                   "dense_below": dense_below}
    models, _, initial = train_distributed(shards, 2, None,
                                           compression=compression)
    residuals = {}

    def compress(gradient, worker, index, scale):
        if gradient.numel() < dense_below:
            return gradient
        residual = residuals.setdefault((worker, index),
                                        torch.zeros_like(gradient))
        return top_k_with_feedback(gradient * scale, residual, 0.1, 1) / scale

    reference = train_reference(initial[0], 2, None, compress)
    for a, b in zip(models[0].parameters(), reference.parameters()):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


def test_dense_below_must_be_a_count():
    with pytest.raises(ValueError, match="^dense_below"):
        gradwire.Compression("topk", dense_below=-1)
    with pytest.raises(ValueError, match="^dense_below"):
        gradwire.Compression("topk", dense_below=0.5)


@pytest.mark.parametrize("clip", [None, 0.5])
def test_update_exchange_applies_the_mean_of_the_local_updates(start_shards,
                                                               clip):
    """exchange="updates", lossless: each worker's optimizer steps on its
    own gradient, and the model moves by the mean of their updates. A
    synchronize() before clipping (as a DDP script is ported) returns at
    once, and the clip clips the worker's own gradient."""
    shards = start_shards(2, 2)
    models, _, initial = train_distributed(
        shards, 2, clip, compression={"compressor": "none"},
        exchange="updates", overlap=False)
    reference = initial[0]
    locals_ = [copy.deepcopy(reference) for _ in range(2)]
    optimizers = [make_optimizer(m) for m in locals_]
    schedulers = [torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)
                  for o in optimizers]
    for step in range(STEPS):
        updates = []
        for worker, local in enumerate(locals_):
            with torch.no_grad():
                for p, q in zip(local.parameters(), reference.parameters()):
                    p.copy_(q)
            points, labels = batch(step, worker)
            optimizers[worker].zero_grad()
            torch.nn.functional.cross_entropy(local(points),
                                              labels).backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(local.parameters(), clip)
            optimizers[worker].step()
            schedulers[worker].step()
            updates.append([p.detach() - q.detach() for p, q in
                            zip(local.parameters(), reference.parameters())])
        with torch.no_grad():
            for p, *us in zip(reference.parameters(), *updates):
                p.add_(torch.stack(us).mean(0))
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)
    for a, b in zip(models[0].parameters(), reference.parameters()):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


def test_compressed_exchange_keeps_workers_identical(start_shards):
    shards = start_shards(1, 2)
    models, _, _ = train_distributed(
        shards, 2, None,
        compression={"compressor": "topk", "ratio": 0.05})
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)


def test_bad_options_are_refused():
    model = make_model(seed=1)
    with pytest.raises(ValueError, match="^lr"):
        DistributedOptimizer(make_optimizer(model), shards=["127.0.0.1:1"],
                             lr=0.1)
    with pytest.raises(ValueError, match="^fold_scale"):
        DistributedOptimizer(make_optimizer(model), shards=["127.0.0.1:1"],
                             fold_scale=0.5)
    with pytest.raises(ValueError, match="compression"):
        DistributedOptimizer(make_optimizer(model), shards=["127.0.0.1:1"],
                             compression={"ratoi": 0.1})
    with pytest.raises(ValueError, match="^optimizer"):
        DistributedOptimizer(model, shards=["127.0.0.1:1"])
    with pytest.raises(ValueError, match="^pull: set it in compression"):
        DistributedOptimizer(make_optimizer(model), shards=["127.0.0.1:1"],
                             pull="delta")
    with pytest.raises(ValueError, match="^exchange"):
        DistributedOptimizer(make_optimizer(model), shards=["127.0.0.1:1"],
                             exchange="weights")
    with pytest.raises(ValueError, match="^overlap"):
        DistributedOptimizer(make_optimizer(model), shards=["127.0.0.1:1"],
                             exchange="updates", overlap=True)
    with pytest.raises(ValueError, match="^ratio"):
        DistributedOptimizer(make_optimizer(model), shards=["127.0.0.1:1"],
                             compression={"compressor": "topk", "ratio": 5})


def test_auto_exchanges_updates_for_adaptive_optimizers(start_shards):
    model = make_model(seed=1)
    chosen = {}
    for name, optimizer in (
            ("sgd", torch.optim.SGD(model.parameters(), lr=0.1)),
            ("adam", torch.optim.Adam(model.parameters())),
            ("adadelta", torch.optim.Adadelta(model.parameters()))):
        # A job each: the shards keep the first job's aggregation (means
        # for gradients, replicas for updates).
        shards = start_shards(1, 1)
        opt = DistributedOptimizer(optimizer, model,
                                   shards=[shards[0].address])
        chosen[name] = opt.exchange
        opt.close()
    assert chosen == {"sgd": "gradients", "adam": "updates",
                      "adadelta": "updates"}
    # Lossless pushes: every optimizer steps on the exact mean, as DDP's
    # (a job of its own: the shards keep the first job's pull setting).
    lossless = start_shards(1, 1)
    opt = DistributedOptimizer(torch.optim.Adam(model.parameters()), model,
                               compression={"compressor": "none"},
                               shards=[lossless[0].address])
    assert opt.exchange == "gradients"
    opt.close()


def test_gradwire_exchange_chooses_where_the_script_leaves_auto(
        start_shards, monkeypatch):
    shards = start_shards(1, 1)
    model = make_model(seed=1)
    monkeypatch.setenv("GRADWIRE_EXCHANGE", "gradients")
    opt = DistributedOptimizer(torch.optim.Adam(model.parameters()), model,
                               shards=[shards[0].address])
    assert opt.exchange == "gradients"
    opt.close()
    # The script's own choice wins (a job of its own: the shards keep the
    # first job's aggregation).
    opt = DistributedOptimizer(torch.optim.Adam(model.parameters()), model,
                               exchange="updates", overlap=False,
                               shards=[start_shards(1, 1)[0].address])
    assert opt.exchange == "updates"
    opt.close()
    monkeypatch.setenv("GRADWIRE_EXCHANGE", "weights")
    with pytest.raises(ValueError, match="^GRADWIRE_EXCHANGE: 'weights'"):
        DistributedOptimizer(torch.optim.Adam(model.parameters()), model,
                             shards=["127.0.0.1:1"])


@pytest.mark.parametrize("exchange", ["gradients", "updates"])
def test_step_with_a_closure_steps_as_backward_then_step(start_shards,
                                                         exchange):
    """step(closure), as PyTorch Lightning calls it: the closure computes
    the loss and gradients, the exchange follows, and the closure's loss
    is returned; the weights are those of backward() then step()."""
    results = []
    for use_closure in (False, True):
        shards = start_shards(1, 1)
        model = make_model(seed=3)
        opt = DistributedOptimizer(
            torch.optim.Adam(model.parameters(), lr=0.01), model,
            shards=[shards[0].address], exchange=exchange, overlap=False)
        losses = []
        for step in range(3):
            points, labels = batch(step, 0)

            def closure():
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(points),
                                                         labels)
                loss.backward()
                return loss

            if use_closure:
                losses.append(opt.step(closure).item())
            else:
                losses.append(closure().item())
                opt.step()
        opt.close()
        results.append((losses, [p.detach().clone()
                                 for p in model.parameters()]))
    (plain_losses, plain), (closure_losses, stepped) = results
    assert closure_losses == plain_losses
    for a, b in zip(plain, stepped):
        assert torch.equal(a, b)
