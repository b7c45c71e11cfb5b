"""Mixed precision for PyTorch users, through DistributedOptimizer and the
DDP communication hook: torch.autocast (bf16 on the CPU), bf16 parameters,
and GradScaler's skipped step, each rank a process
(mixed_precision_worker.py) against real shards."""

import pathlib

import pytest
import torch

import gradwire
import gradwire.torch
from conftest import run_in_threads
from mixed_precision_worker import CpuGradScaler, batch, model_for_test
from two_ranks import free_port, run_two_ranks


WORKER = pathlib.Path(__file__).with_name("mixed_precision_worker.py")
STEPS = 10
INF_AT = 2


def run_ranks(tmp_path, name, shards, *args):
    """Runs both ranks to the end; their results, rank 0's first."""
    out = tmp_path / f"{name}-{{rank}}.pt"
    run_two_ranks(tmp_path, name, WORKER, [f"--out={out}", *args], shards,
                  timeout=120)
    return [torch.load(str(out).replace("{rank}", str(rank)))
            for rank in range(2)]


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def assert_trains_alike(ranks, dtype):
    for result in ranks:
        losses = result["losses"]
        assert sum(losses[-3:]) < sum(losses[:3]) - 0.1, losses
        assert all(p.dtype == dtype for p in result["parameters"][-1])
    for step in range(STEPS):
        assert same(ranks[0]["parameters"][step],
                    ranks[1]["parameters"][step]), step


@pytest.mark.parametrize("api", ["optimizer", "hook"])
def test_autocast_trains(start_shards, tmp_path, api):
    ranks = run_ranks(tmp_path, api, start_shards(1, 2), f"--api={api}",
                      f"--steps={STEPS}", "--autocast")
    assert_trains_alike(ranks, torch.float32)


def test_bf16_parameters_train_through_distributed_optimizer(
        start_shards, tmp_path):
    """A model converted with .to(torch.bfloat16): float32 aggregation
    buffers, the pushed values at bf16 unless the script chose."""
    ranks = run_ranks(tmp_path, "bf16", start_shards(1, 2),
                      "--api=optimizer", f"--steps={STEPS}", "--bf16")
    assert_trains_alike(ranks, torch.bfloat16)
    assert "value_type='bf16'" in ranks[0]["compression"]


class Bucket:
    """What DDP hands a communication hook (torch's GradBucket): here one
    bucket holding every parameter's gradient as a view into its flat
    buffer."""

    def __init__(self, parameters):
        self._parameters = list(parameters)
        self._buffer = torch.cat([p.grad.reshape(-1)
                                  for p in self._parameters])
        self._gradients, offset = [], 0
        for p in self._parameters:
            self._gradients.append(
                self._buffer[offset:offset + p.numel()].view_as(p))
            offset += p.numel()

    def parameters(self):
        return self._parameters

    def gradients(self):
        return self._gradients

    def is_last(self):
        return True

    def buffer(self):
        return self._buffer


def test_bf16_parameters_through_the_hook(start_shards):
    """The hook on a bf16 model. DDP over gloo cannot start one in torch
    1.13 (its broadcast of the parameters fails with "Invalid scalar
    type"; NCCL can), so the hook gets its buckets from this test, shaped
    as DDP's, from two workers as threads."""
    shards = start_shards(1, 2)
    models = [model_for_test().to(torch.bfloat16) for _ in range(2)]
    gradients, means = [None, None], [None, None]

    def work(rank):
        state = gradwire.torch.DDPHookState(
            compression={"compressor": "none"},
            shards=[s.address for s in shards],
            node_rank=rank, num_nodes=2)
        x, y = batch(0, rank)
        model = models[rank]
        torch.nn.functional.cross_entropy(
            model(x.to(torch.bfloat16)), y).backward()
        gradients[rank] = [p.grad.clone() for p in model.parameters()]
        bucket = Bucket(model.parameters())
        means[rank] = gradwire.torch.ddp_comm_hook(state, bucket).wait()
        state.close()

    run_in_threads(work, 2)
    assert torch.equal(means[0], means[1])
    assert means[0].dtype == torch.bfloat16
    expected = torch.cat([(a.float() + b.float()).reshape(-1) / 2
                          for a, b in zip(*gradients)])
    assert torch.allclose(means[0].float(), expected, rtol=1e-2, atol=1e-4)


@pytest.mark.parametrize("api,restore", [("optimizer", "auto"),
                                         ("hook", "on")])
def test_grad_scaler_skips_an_overflow_on_every_worker(
        start_shards, tmp_path, api, restore):
    """torch's GradScaler under autocast, rank 0's gradient infinite at
    step INF_AT: every worker skips that step, lowers its scale alike and
    keeps its error-feedback residual as it was. GradScaler runs here as
    CpuGradScaler (mixed_precision_worker.py): torch 1.13's turns itself
    off without CUDA, and its two kernels exist for CUDA only; everything
    else, step()'s dispatch included, is torch's own code."""
    ranks = run_ranks(tmp_path, f"{api}-scaler", start_shards(1, 2),
                      f"--api={api}", f"--steps={STEPS}", "--autocast",
                      "--scaler", f"--inf-at={INF_AT}",
                      f"--restore-residuals={restore}")
    for result in ranks:
        weights, norms = result["parameters"], result["residual_norms"]
        assert same(weights[INF_AT], weights[INF_AT - 1])
        assert not same(weights[INF_AT + 1], weights[INF_AT])
        assert norms[INF_AT - 1] > 0
        assert norms[INF_AT] == norms[INF_AT - 1]
        assert all(0 < n < float("inf") for n in norms)
        scales = result["scales"]
        assert scales[INF_AT] == scales[INF_AT - 1] / 2, scales
        assert result["skipped"] == 1
    assert ranks[0]["scales"] == ranks[1]["scales"]
    assert_trains_alike(ranks, torch.float32)


def test_without_restoring_the_skipped_step_stays_in_the_residual(
        start_shards, tmp_path):
    """The same run with restore_residuals=False: the residual after the
    skipped step is not the one before it (the test above would see the
    difference)."""
    ranks = run_ranks(tmp_path, "kept", start_shards(1, 2),
                      "--api=optimizer", f"--steps={INF_AT + 1}",
                      "--autocast", "--scaler", f"--inf-at={INF_AT}",
                      "--restore-residuals=off")
    for result in ranks:
        norms = result["residual_norms"]
        assert norms[INF_AT] != norms[INF_AT - 1]


def one_worker(shards, model, **options):
    sgd = torch.optim.SGD(model.parameters(), lr=0.05)
    return gradwire.torch.DistributedOptimizer(
        sgd, model, shards=[s.address for s in shards], node_rank=0,
        num_nodes=1, **options)


def test_unscaling_comes_after_synchronize(start_shards):
    """Clipping under a GradScaler: synchronize() before scaler.unscale_;
    the other order looked at this worker's own gradients and is
    refused."""
    model = model_for_test()
    optimizer = one_worker(start_shards(1, 1), model, overlap=False)
    scaler = CpuGradScaler(init_scale=2.0 ** 10)
    for step in range(2):
        optimizer.zero_grad()
        x, y = batch(step, 0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if step == 1:
            scaler.unscale_(optimizer)
            with pytest.raises(ValueError, match="^grad_scaler: .*"
                               "optimizer.synchronize()"):
                scaler.step(optimizer)
            break
        optimizer.synchronize()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(optimizer)
        scaler.update()
        assert not same(before, list(model.parameters()))
    optimizer.close()


@pytest.mark.parametrize("compression,message", [
    ({"value_type": "fp16"}, "^value_type: fp16 cannot carry .*bf16"),
    ({"compressor": "fp16"}, "^compression: compressor fp16 cannot carry"),
])
def test_a_bf16_model_beside_fp16_values_is_refused(compression, message):
    """Before anything connects: nothing listens at the shard address."""
    model = model_for_test().to(torch.bfloat16)
    with pytest.raises(ValueError, match=message):
        gradwire.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1), model,
            compression=compression, shards=[f"127.0.0.1:{free_port()}"],
            node_rank=0, num_nodes=1)
    with pytest.raises(ValueError, match="^overlap: torch.bfloat16"):
        gradwire.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1), model,
            overlap=True, shards=[f"127.0.0.1:{free_port()}"],
            node_rank=0, num_nodes=1)
