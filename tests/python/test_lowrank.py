"""Compression("powersgd"): each gradient matrix as one rank-r factor a
step, the two sides in turn, with error feedback (gradwire/_lowrank.py),
alone and through real shard processes."""

import pathlib

import pytest
import torch

import gradwire
from gradwire._lowrank import _SEED, LowRank, matrix_shape
from gradwire.torch import DistributedOptimizer

from test_distributed_optimizer import STEPS as TRAINED_STEPS
from test_distributed_optimizer import train_distributed, train_reference
from test_nonfinite import BAD_STEP, STEPS, plain_step, run
from test_overlap import run_local_group
from test_parameter_sync import batch, make_model

LOCAL_GROUP_WORKER = pathlib.Path(__file__).with_name(
    "local_group_worker.py")


def test_which_parameters_are_compressed():
    assert matrix_shape(torch.zeros(64, 32), 2, 0) == (64, 32)
    # A convolution: its output channels by the rest, as DDP's hook views it.
    assert matrix_shape(torch.zeros(16, 3, 3, 3), 1, 0) == (16, 27)
    assert matrix_shape(torch.zeros(64), 2, 0) is None
    # Two rank-2 factors of a 4 x 64 matrix are more than half of it.
    assert matrix_shape(torch.zeros(4, 64), 2, 0) is None
    assert matrix_shape(torch.zeros(64, 32), 2, 4096) is None


def one_step(low_rank, gradient, step=0):
    """One worker's step alone: its factors are the means, through as many
    exchanges as the low-rank side asks for. Returns the gradient that
    comes back and what compress() left in `gradient`."""
    sent = gradient.clone()
    factors = low_rank.compress([sent], True, step)
    left_in_place = sent.clone()
    exchanges = 1
    push = low_rank.expand([sent], factors, step)
    while push is not None:
        exchanges += 1
        push = low_rank.expand([sent], push, step)
    # The dense steps are one exchange.
    assert exchanges == (low_rank.exchanges if low_rank._compresses(step)
                         else 1)
    return sent, left_in_place


def test_the_projection_and_the_residual_add_up_to_the_gradient():
    low_rank = LowRank([("w", torch.zeros(40, 30))], rank=3, dense_below=0)
    gradient = torch.randn(40, 30, generator=torch.Generator().manual_seed(1))
    sent, left = one_step(low_rank, gradient)
    assert torch.count_nonzero(left) == 0
    assert torch.linalg.matrix_rank(sent) == 3
    residual = low_rank.state_dict()["matrices"]["w"]["residual"]
    assert torch.allclose(sent + residual, gradient, atol=1e-5)
    assert low_rank.residual_norm() == pytest.approx(float(residual.norm()))


def test_error_feedback_loses_nothing_and_drains_on_the_left_side():
    """One exchange a step, a constant rank-2 gradient: the first right
    basis is random, so a right step holds back what it misses; the left
    basis that follows spans the gradient's columns, so every left step
    sends the whole backlog. Over all steps nothing is lost: what went out
    plus the residual is every gradient."""
    generator = torch.Generator().manual_seed(2)
    gradient = (torch.randn(50, 2, generator=generator)
                @ torch.randn(2, 20, generator=generator))
    low_rank = LowRank([("w", gradient)], rank=2, dense_below=0,
                       exchanges=1)
    sent_total = torch.zeros_like(gradient)
    scale = float(gradient.norm())
    for step in range(8):
        sent, _ = one_step(low_rank, gradient, step)
        sent_total += sent
        if step % 2 == 1:
            assert low_rank.residual_norm() < 1e-5 * scale
        else:
            assert low_rank.residual_norm() > 1e-3 * scale
        residual = low_rank.state_dict()["matrices"]["w"]["residual"]
        assert torch.allclose(sent_total + residual, (step + 1) * gradient,
                              atol=1e-3)


def test_two_exchanges_send_a_low_rank_gradient_whole_at_once():
    """PowerSGD's scheme: P = M Q, then Q = M^T P on P's orthonormalized
    columns, from the same step's gradient, so a gradient of rank r goes
    out whole in its first step (the one-exchange form needs two), and a
    full-rank one leaves exactly the rest in the residual."""
    generator = torch.Generator().manual_seed(3)
    low_rank_gradient = (torch.randn(50, 2, generator=generator)
                         @ torch.randn(2, 20, generator=generator))
    two = LowRank([("w", low_rank_gradient)], rank=2, dense_below=0,
                  exchanges=2)
    sent, left = one_step(two, low_rank_gradient)
    assert torch.count_nonzero(left) == 0
    assert torch.allclose(sent, low_rank_gradient, atol=1e-4)
    assert two.residual_norm() < 1e-4 * float(low_rank_gradient.norm())
    one = LowRank([("w", low_rank_gradient)], rank=2, dense_below=0,
                  exchanges=1)
    one_step(one, low_rank_gradient)
    assert one.residual_norm() > 1e-2 * float(low_rank_gradient.norm())
    full = torch.randn(40, 30, generator=generator)
    two = LowRank([("w", full)], rank=3, dense_below=0, exchanges=2)
    sent, _ = one_step(two, full)
    assert torch.linalg.matrix_rank(sent) == 3
    residual = two.state_dict()["matrices"]["w"]["residual"]
    assert torch.allclose(sent + residual, full, atol=1e-5)


def test_dense_steps_send_the_gradient_whole():
    low_rank = LowRank([("w", torch.zeros(40, 30))], rank=2, dense_below=0,
                       dense_steps=2)
    gradient = torch.randn(40, 30)
    factors = low_rank.compress([gradient.clone()], True, 1)
    assert all(torch.count_nonzero(f) == 0 for f in factors)
    sent, _ = one_step(low_rank, gradient, step=1)
    assert torch.equal(sent, gradient)
    sent, _ = one_step(low_rank, gradient, step=2)
    assert not torch.equal(sent, gradient)


def test_state_dict_round_trip_and_refusal():
    named = [("w", torch.zeros(40, 30))]
    low_rank = LowRank(named, rank=2, dense_below=0)
    one_step(low_rank, torch.randn(40, 30))
    restored = LowRank(named, rank=2, dense_below=0)
    restored.load_state_dict(low_rank.state_dict())
    gradient = torch.randn(40, 30)
    assert torch.equal(one_step(low_rank, gradient)[0],
                       one_step(restored, gradient)[0])
    other = LowRank([("v", torch.zeros(40, 30))], rank=2, dense_below=0)
    with pytest.raises(ValueError, match="other matrices"):
        other.load_state_dict(low_rank.state_dict())


def test_options_are_checked():
    with pytest.raises(ValueError, match="^rank"):
        gradwire.Compression("powersgd", rank=0)
    with pytest.raises(ValueError, match="^rank: an option of powersgd"):
        gradwire.Compression("topk", rank=2)
    with pytest.raises(ValueError, match="^exchanges: expected 1 or 2"):
        gradwire.Compression("powersgd", exchanges=3)
    with pytest.raises(ValueError, match="^exchanges: an option of"):
        gradwire.Compression("topk", exchanges=2)
    with pytest.raises(ValueError, match="ParameterSync"):
        gradwire.Compression("powersgd").sync_options()
    model = make_model(seed=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # Refused before anything connects: no shard listens there.
    for options in (dict(exchange="updates"), dict(overlap=True)):
        with pytest.raises(ValueError, match="powersgd"):
            DistributedOptimizer(optimizer, model,
                                 compression={"compressor": "powersgd"},
                                 shards=["127.0.0.1:1"], **options)


def orthonormalized(factor):
    return torch.linalg.qr(factor, mode="reduced")[0]


def low_rank_reference(rank, num_workers):
    """train_reference's compress(): each worker projects its gradient plus
    residual onto the basis the workers share and keeps the rest; once
    the last worker has compressed a matrix, the mean of the factors,
    orthonormalized, is the basis of the other side for the next step."""
    matrices = {}

    def compress(gradient, worker, index, scale):
        shape = matrix_shape(gradient, rank, 0)
        if shape is None:
            return gradient
        rows, columns = shape
        start = torch.randn(columns, rank,
                            generator=torch.Generator().manual_seed(
                                _SEED + index))
        m = matrices.setdefault(index, dict(
            right=orthonormalized(start), left=None, left_side=False,
            residuals={}, factors=[]))
        residual = m["residuals"].setdefault(worker,
                                             torch.zeros(rows, columns))
        total = residual + (gradient * scale).reshape(rows, columns)
        if m["left_side"]:
            factor = total.t() @ m["left"]
            projection = m["left"] @ factor.t()
        else:
            factor = total @ m["right"]
            projection = factor @ m["right"].t()
        residual.copy_(total - projection)
        m["factors"].append(factor)
        if len(m["factors"]) == num_workers:
            mean = torch.stack(m["factors"]).mean(0)
            m["right" if m["left_side"] else "left"] = orthonormalized(mean)
            m["left_side"] = not m["left_side"]
            m["factors"] = []
        return projection.reshape(gradient.shape) / scale

    return compress


def test_matches_one_process_on_the_mean_of_the_projections(start_shards):
    """One exchange a step, two workers, two shards: the first layer's
    weight (64 x 32) goes as rank-2 factors, the rest whole; the wrapped
    optimizer steps on the mean of the workers' projections, as one process
    computes it, and the workers stay identical."""
    assert_matches_reference(start_shards(2, 2), 1, low_rank_reference(2, 2))


def assert_matches_reference(shards, exchanges, compress):
    """Two workers with rank-2 powersgd (`exchanges` a step) through
    `shards` end identical, where one process does with `compress`."""
    compression = {"compressor": "powersgd", "rank": 2, "dense_below": 0,
                   "exchanges": exchanges}
    models, _, initial = train_distributed(shards, 2, None,
                                           compression=compression)
    reference = train_reference(initial[0], 2, None, compress)
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)
    for a, b in zip(models[0].parameters(), reference.parameters()):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


def two_exchange_reference(rank, num_workers):
    """train_reference's compress() for two exchanges: once every worker's
    M (gradient plus residual) of a matrix is in, P is the mean of M Q,
    orthonormalized, and the step's gradient P P^T mean(M); each worker
    keeps M minus it, and P^T mean(M), orthonormalized, is the next Q. The
    last worker returns num_workers times the gradient and the others
    zero, so that their mean is the gradient."""
    matrices = {}

    def compress(gradient, worker, index, scale):
        shape = matrix_shape(gradient, rank, 0)
        if shape is None:
            return gradient
        rows, columns = shape
        start = torch.randn(columns, rank,
                            generator=torch.Generator().manual_seed(
                                _SEED + index))
        m = matrices.setdefault(index, dict(right=orthonormalized(start),
                                            residuals={}, totals=[]))
        residual = m["residuals"].setdefault(worker,
                                             torch.zeros(rows, columns))
        m["totals"].append(residual + (gradient * scale).reshape(rows,
                                                                 columns))
        if len(m["totals"]) < num_workers:
            return torch.zeros_like(gradient)
        left = orthonormalized(torch.stack(
            [t @ m["right"] for t in m["totals"]]).mean(0))
        factor = torch.stack([t.t() @ left for t in m["totals"]]).mean(0)
        mean = left @ factor.t()
        for w, total in enumerate(m["totals"]):
            m["residuals"][w].copy_(total - mean)
        m["right"], m["totals"] = orthonormalized(factor), []
        return mean.reshape(gradient.shape) * num_workers / scale

    return compress


def test_two_exchanges_match_one_process(start_shards):
    """exchanges=2 through two real shards: the wrapped optimizer steps
    on PowerSGD's mean projection, as one process computes it, with the
    workers identical; each step is two exchanges."""
    assert_matches_reference(start_shards(2, 2), 2,
                             two_exchange_reference(2, 2))


def test_two_exchanges_in_a_local_group_match_one_process(start_shards,
                                                          tmp_path):
    """Two local ranks of one node (`gradwire run --nnodes 1 -n 2`), each
    on data of its own: each projects its own gradient, the node reduces
    the factors (the second exchange carries them alone,
    ParameterSync::StepCarrying), and both ranks end where one process
    stepping on PowerSGD's mean projection of their gradients does."""
    result, ranks = run_local_group(
        tmp_path, start_shards(1, 1)[0], script=LOCAL_GROUP_WORKER,
        compression="powersgd,rank=2,dense_below=0")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert [r["local_size"] for r in ranks] == [2, 2]
    assert ranks[0]["final"] == ranks[1]["final"]
    assert ranks[0]["exchanges"] == 2 * TRAINED_STEPS
    reference = make_model(seed=1)
    with torch.no_grad():
        for p, values in zip(reference.parameters(), ranks[0]["initial"]):
            p.copy_(torch.tensor(values).reshape(p.shape))
    reference = train_reference(reference, 2, None,
                                two_exchange_reference(2, 2))
    for p, values in zip(reference.parameters(), ranks[0]["final"]):
        final = torch.tensor(values).reshape(p.shape)
        assert torch.allclose(p, final, atol=1e-5), (p - final).abs().max()


def test_two_exchanges_count_as_one_step_in_the_figures(start_shards):
    """The per-step figures count training steps and one dense model a
    step (as DDP's all-reduce), not the two exchanges; the shards count
    both."""
    shards = start_shards(1, 1)
    model = make_model(seed=1)
    optimizer = DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), model,
        compression={"compressor": "powersgd", "rank": 2,
                     "dense_below": 0, "exchanges": 2},
        shards=[shards[0].address], node_rank=0, num_nodes=1)
    optimizer.metrics()
    for step in range(3):
        points, labels = batch(step, 0)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(points), labels).backward()
        optimizer.step()
    figures = optimizer.metrics()
    dense = 4 * sum(p.numel() for p in model.parameters())
    assert figures["gradwire/steps"] == 3
    assert optimizer.next_step == 6
    # The factor buffers count too: a few percent over the model.
    assert dense <= figures["gradwire/dense_equivalent_bytes"] < 1.5 * dense
    optimizer.close()


@pytest.mark.parametrize("exchanges", [1, 2])
def test_a_skipped_step_puts_the_residuals_back(start_shards, exchanges):
    """An infinity in worker 0's gradient: every worker skips the step, and
    with restore_residuals=True each worker's low-rank residual is what
    it was before that step, not the finite worker's gradient held
    back; the workers stay identical."""
    shards = start_shards(1, 2)
    norms = [[], []]

    def loop(optimizer, net, step, rank):
        plain_step(optimizer, net, step, rank)
        norms[rank].append(optimizer._lowrank.residual_norm())

    weights, optimizers = run(
        shards, lambda net: torch.optim.SGD(net.parameters(), lr=0.1), loop,
        restore_residuals=True,
        compression={"compressor": "powersgd", "rank": 2, "dense_below": 0,
                     "exchanges": exchanges})
    for rank in (0, 1):
        assert norms[rank][BAD_STEP] == norms[rank][BAD_STEP - 1] > 0
        assert norms[rank][BAD_STEP + 1] != norms[rank][BAD_STEP]
        assert optimizers[rank].metrics()["gradwire/skipped_steps"] == 1
    for step in range(STEPS):
        for a, b in zip(weights[0][step], weights[1][step]):
            assert torch.equal(a, b), step
    for optimizer in optimizers:
        optimizer.close()
