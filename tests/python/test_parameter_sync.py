"""gradwire.ParameterSync against real shard processes."""

import threading
import time

import pytest
import torch

import gradwire
from conftest import run_in_threads


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 4))


def batch(step, worker):
    generator = torch.Generator().manual_seed(1000 * step + worker)
    points = torch.randn(32, 32, generator=generator)
    return points, points[:, :4].argmax(1)


def run_workers(shards, num_workers, steps, overlap=True, same_seed=False,
                pull_ahead=False, wire=None, **options):
    """Trains one model per worker thread through gradwire; returns the
    models and the final stats. Without `same_seed` each worker draws
    other initial weights (the first Init's win, whichever worker sent
    it)."""
    models = [make_model(seed=1 if same_seed else worker + 1)
              for worker in range(num_workers)]
    stats = [None] * num_workers

    def work(worker):
        sync = gradwire.ParameterSync(
            shards=[s.address for s in shards], node_rank=worker,
            num_nodes=num_workers, **options)
        model = models[worker]
        sync.register(model.named_parameters(), overlap=overlap)
        if pull_ahead:
            sync.pull_ahead(model)
        for step in range(steps):
            points, labels = batch(step, worker)
            model.zero_grad()
            torch.nn.functional.cross_entropy(model(points),
                                              labels).backward()
            sync.step()
        sync.await_weights()
        stats[worker] = sync.stats
        if wire is not None:
            wire[worker] = sync.wire_bytes
        sync.close()

    run_in_threads(work, num_workers)
    return models, stats


OPTIONS = dict(compressor="topk", ratio=0.05, value_type="fp16",
               optimizer="sgd", lr=0.1, partition_bytes=4096)


def weights(model):
    return [p.detach().clone() for p in model.parameters()]


def test_two_workers_end_with_identical_weights(start_shards):
    shards = start_shards(2, 2)
    models, stats = run_workers(shards, 2, steps=20, **OPTIONS)
    for a, b in zip(weights(models[0]), weights(models[1])):
        assert torch.equal(a, b)
    # They trained: the weights moved away from the shards' initial values.
    initial = weights(make_model(seed=1))
    assert any(not torch.equal(a, b)
               for a, b in zip(initial, weights(models[0])))
    for s in stats:
        assert s.steps == 20
        assert 0 < s.pushed_bytes < s.dense_equivalent_bytes / 5


def test_byte_counters_match_the_shards_metrics(start_shards):
    shards = start_shards(2, 2)
    _, stats = run_workers(shards, 2, steps=5, **OPTIONS)
    assert all(s.retries == 0 for s in stats)
    received = sum(s.metric_sum("gradwire_shard_received_bytes_total",
                                rpc="push") for s in shards)
    sent = sum(s.metric_sum("gradwire_shard_sent_bytes_total", rpc="pull")
               for s in shards)
    assert received == sum(s.pushed_bytes for s in stats)
    assert sent == sum(s.pulled_bytes for s in stats)
    assert set(stats[0].as_dict()) >= {"pushed_bytes", "pulled_bytes",
                                       "dense_equivalent_bytes", "steps"}


def test_start_up_and_wire_bytes_are_reported(start_shards):
    """Same initial weights: the workers send one copy of them between
    them (each shard's from the worker it prefers, or from the first to ask
    when that one is late) and fingerprints of the rest, and neither pulls
    them back; the kernel's TCP counts carry at least the payload."""
    wire = [None, None]
    _, stats = run_workers(start_shards(2, 2), 2, steps=3, same_seed=True,
                           wire=wire, **OPTIONS)
    model_bytes = sum(p.numel() * 4 for p in make_model(1).parameters())
    sent = sum(s.startup_bytes_sent for s in stats)
    assert model_bytes <= sent < model_bytes * 5 / 4
    assert all(s.startup_bytes_received < model_bytes / 4 for s in stats)
    assert all(s.startup_seconds > 0 for s in stats)
    assert stats[0].as_dict()["startup_bytes_sent"] == stats[0].startup_bytes_sent
    for s, w in zip(stats, wire):
        assert w["sent"] >= s.startup_bytes_sent + s.pushed_bytes
        assert w["received"] >= s.pulled_bytes


def test_overlap_gives_the_same_weights_as_no_overlap(start_shards):
    overlapped, _ = run_workers(start_shards(2, 2), 2, steps=10,
                                overlap=True, same_seed=True, **OPTIONS)
    sequential, _ = run_workers(start_shards(2, 2), 2, steps=10,
                                overlap=False, same_seed=True, **OPTIONS)
    for a, b in zip(weights(overlapped[0]), weights(sequential[0])):
        assert torch.equal(a, b)


def test_pull_ahead_gives_the_same_weights(start_shards):
    ahead, stats = run_workers(start_shards(2, 2), 2, steps=10,
                               same_seed=True, pull_ahead=True, **OPTIONS)
    after, _ = run_workers(start_shards(2, 2), 2, steps=10,
                           same_seed=True, **OPTIONS)
    for a, b in zip(weights(ahead[0]), weights(after[0])):
        assert torch.equal(a, b)
    for a, b in zip(weights(ahead[0]), weights(ahead[1])):
        assert torch.equal(a, b)
    for s in stats:
        assert s.steps == 10
        # The pull thread's time, and what the training thread waited for
        # (which also holds thread wake-ups: no order between the two).
        assert s.pull_seconds > 0 and s.pull_wait_seconds >= 0


def test_pull_ahead_step_returns_before_the_peer_and_forward_waits(
        start_shards):
    """With pull ahead, step() returns while the BSP step still waits for
    the other worker; the next forward pass waits in the module's pre-hook
    until that worker has pushed."""
    shards = start_shards(1, 2)
    syncs, models = [], []
    for worker in range(2):
        sync = gradwire.ParameterSync(shards=[shards[0].address],
                                      node_rank=worker, num_nodes=2,
                                      **OPTIONS)
        model = make_model(seed=1)
        sync.register(model.named_parameters(), overlap=True)
        syncs.append(sync)
        models.append(model)
    syncs[0].pull_ahead(models[0])
    points, labels = batch(0, 0)
    torch.nn.functional.cross_entropy(models[0](points), labels).backward()
    syncs[0].step()  # Worker 1 has not pushed: without pull ahead, blocks.
    pushed_at = []

    def peer():
        time.sleep(0.5)
        points, labels = batch(0, 1)
        torch.nn.functional.cross_entropy(models[1](points),
                                          labels).backward()
        pushed_at.append(time.monotonic())
        syncs[1].step()

    thread = threading.Thread(target=peer)
    thread.start()
    models[0](points)  # Waits for worker 1's push in the pre-hooks.
    forward_done = time.monotonic()
    thread.join()
    assert pushed_at and forward_done >= pushed_at[0]
    syncs[0].await_weights()
    for a, b in zip(weights(models[0]), weights(models[1])):
        assert torch.equal(a, b)
    for sync in syncs:
        sync.close()


def test_pull_ahead_needs_overlap_and_the_model(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
    model = make_model(seed=1)
    sync.register(model.named_parameters(), overlap=False)
    with pytest.raises(gradwire.Error, match="overlap=True"):
        sync.pull_ahead(model)
    sync.close()
    sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
    sync.register(model.named_parameters(), overlap=True)
    with pytest.raises(ValueError, match="none of the registered"):
        sync.pull_ahead(make_model(seed=2))
    sync.close()


def test_changing_a_pushed_gradient_raises(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address], **OPTIONS)
    model = make_model(seed=1)
    sync.register(model.named_parameters(), overlap=True)
    points, labels = batch(0, 0)
    torch.nn.functional.cross_entropy(model(points), labels).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
    with pytest.raises(gradwire.Error, match="changed after it was pushed"):
        sync.step()
    sync.close()


def test_a_dead_shard_raises_within_the_deadline(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address],
                                  rpc_timeout_seconds=2,
                                  pull_timeout_seconds=2, **OPTIONS)
    model = make_model(seed=1)
    sync.register(model.named_parameters(), overlap=False)
    shards[0].kill()
    points, labels = batch(0, 0)
    torch.nn.functional.cross_entropy(model(points), labels).backward()
    start = time.monotonic()
    with pytest.raises(gradwire.Error) as raised:
        sync.step()
    assert time.monotonic() - start < 20
    assert "UNAVAILABLE" in str(raised.value) or \
        "DEADLINE_EXCEEDED" in str(raised.value)


def test_an_unreachable_shard_raises_at_connect():
    start = time.monotonic()
    with pytest.raises(gradwire.Error, match="UNAVAILABLE|DEADLINE"):
        # Port 1 on loopback: nothing listens there.
        sync = gradwire.ParameterSync(shards=["127.0.0.1:1"],
                                      connect_timeout_seconds=2,
                                      rpc_timeout_seconds=2)
        sync.register(make_model(seed=1).named_parameters())
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("option, value", [
    ("compressor", "zip"),
    ("ratio", 0.0),
    ("min_kept", 0),
    ("value_type", "fp8"),
    ("optimizer", "lion"),
    ("lr", -1.0),
    ("momentum", 1.5),
    ("mode", "eventual"),
    ("pull", "sometimes"),
    ("pull_ratio", 2.0),
    ("pull_value_type", "fp8"),
    ("node_rank", 3),
    ("partition_bytes", 3),
    ("push_bucket_bytes", -1),
    ("rpc_timeout_seconds", 0.0),
    ("connect_timeout_seconds", -1.0),
    ("threshold", float("nan")),
    ("levels", 0),
    ("qsgd_bucket", 96),
    ("onebit_bucket", 1),
    ("fold_scale", 2.0),
    ("local_store", "nohost"),
])
def test_bad_options_raise_value_error_naming_the_option(option, value):
    with pytest.raises(ValueError, match=f"^{option}"):
        gradwire.ParameterSync(shards=["127.0.0.1:1"], num_nodes=2,
                               **{option: value})


def test_no_shards_raises_value_error():
    with pytest.raises(ValueError, match="^shards"):
        gradwire.ParameterSync(shards=[])


def test_unknown_keyword_raises_type_error():
    with pytest.raises(TypeError):
        gradwire.ParameterSync(shards=["127.0.0.1:1"], compresor="topk")


def test_a_float64_parameter_is_refused(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address])
    with pytest.raises(ValueError, match="float32"):
        sync.register([("w", torch.zeros(4, dtype=torch.float64))])


def test_register_takes_pairs_only(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address])
    with pytest.raises(ValueError, match="pairs"):
        sync.register([torch.zeros(4)])


def test_optimizer_placement_says_what_runs_where(start_shards):
    shards = start_shards(1, 1)
    sync = gradwire.ParameterSync(shards=[shards[0].address],
                                  compressor="topk", optimizer="momentum",
                                  momentum=0.9, lr=0.05)
    try:
        assert sync.optimizer_placement.startswith(
            "optimizer: momentum 0.9 on the worker before compression")
        assert "SGD lr 0.05 on the shards" in sync.optimizer_placement
    finally:
        sync.close()
