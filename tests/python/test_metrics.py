"""Watching the exchange from a training script: DistributedOptimizer's
per-step figures, log_metrics() into loggers with TensorBoard's and W&B's
signatures, and the /metrics endpoint of a Python worker."""

import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest
import torch

import gradwire
import gradwire._metrics
import gradwire.torch
from conftest import run_in_threads, scrape

HERE = pathlib.Path(__file__).resolve().parent


class TensorBoardLike:
    """add_scalar as torch.utils.tensorboard.SummaryWriter declares it."""

    def __init__(self):
        self.calls = []

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None,
                   new_style=False, double_precision=False):
        self.calls.append((tag, scalar_value, global_step))


class WandbLike:
    """log as a wandb run declares it."""

    def __init__(self):
        self.calls = []

    def log(self, data, step=None, commit=None, sync=None):
        self.calls.append((data, step))


def model():
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 4))


def train(shards, nets, optimizers, steps, **options):
    def work(rank):
        if optimizers[rank] is None:
            optimizers[rank] = gradwire.torch.DistributedOptimizer(
                torch.optim.SGD(nets[rank].parameters(), lr=0.05),
                nets[rank], shards=[s.address for s in shards],
                node_rank=rank, num_nodes=2, **options)
        generator = torch.Generator().manual_seed(rank)
        for _ in range(steps):
            optimizers[rank].zero_grad()
            nets[rank](torch.randn(8, 32, generator=generator)) \
                .square().sum().backward()
            optimizers[rank].step()

    run_in_threads(work, 2)


def test_figures_are_per_step_since_the_last_read(start_shards):
    shards = start_shards(1, 2)
    nets, optimizers = [model(), model()], [None, None]
    train(shards, nets, optimizers, 3, compression={"dense_below": 0})
    stats = optimizers[0].stats
    first = optimizers[0].metrics()
    assert first["gradwire/steps"] == 3
    assert first["gradwire/bytes_sent"] == pytest.approx(
        stats.pushed_bytes / 3)
    assert first["gradwire/bytes_received"] == pytest.approx(
        stats.pulled_bytes / 3)
    assert first["gradwire/dense_equivalent_bytes"] == pytest.approx(
        stats.dense_equivalent_bytes / 3)
    # Top-K 1% of every tensor: far fewer bytes than dense.
    assert first["gradwire/compression_ratio"] > 10
    assert first["gradwire/residual_norm"] > 0
    assert first["gradwire/bytes_sent_total"] == stats.pushed_bytes

    train(shards, nets, optimizers, 2)
    second = optimizers[0].metrics()
    assert second["gradwire/steps"] == 2
    sent = optimizers[0].stats.pushed_bytes - stats.pushed_bytes
    assert second["gradwire/bytes_sent"] == pytest.approx(sent / 2)
    assert optimizers[0].metrics()["gradwire/steps"] == 0
    for optimizer in optimizers:
        optimizer.close()


def test_log_metrics_writes_to_tensorboard_and_wandb(start_shards):
    shards = start_shards(1, 2)
    nets, optimizers = [model(), model()], [None, None]
    # Every tensor through the dense compressor (this model's are all under
    # dense_below, which would send their nonzeros with indices).
    train(shards, nets, optimizers, 2,
          compression={"compressor": "none", "dense_below": 0})
    board = TensorBoardLike()
    figures = gradwire.torch.log_metrics(board, 2, source=optimizers[0])
    assert {tag for tag, _, _ in board.calls} == set(figures)
    assert all(step == 2 for _, _, step in board.calls)
    assert dict((tag, value) for tag, value, _ in board.calls) == figures
    # Lossless: no residual, and the dense equivalent is what was sent.
    assert figures["gradwire/residual_norm"] == 0
    assert figures["gradwire/compression_ratio"] == pytest.approx(1, 0.05)

    train(shards, nets, optimizers, 1)
    run = WandbLike()
    logged = gradwire.torch.log_metrics(run, 3, source=optimizers[0])
    assert run.calls == [(logged, 3)]
    assert logged["gradwire/steps"] == 1

    with pytest.raises(TypeError, match="neither add_scalar .* nor log"):
        gradwire.torch.log_metrics(object(), 4, source=optimizers[0])
    with pytest.raises(ValueError, match="2 DistributedOptimizers live"):
        gradwire.torch.log_metrics(board, 4)
    optimizers[1].close()
    # A closed optimizer is no longer a source: the other one is.
    assert gradwire.torch.log_metrics(board, 4)["gradwire/steps"] == 0
    optimizers[0].close()
    with pytest.raises(ValueError, match="no DistributedOptimizer"):
        gradwire.torch.log_metrics(board, 5)


def test_auto_reports_its_ratio_per_tensor(start_shards):
    shards = start_shards(1, 2)
    nets, optimizers = [model(), model()], [None, None]
    train(shards, nets, optimizers, 3, compression={"compressor": "auto"})
    figures = optimizers[0].metrics()
    ratios = {k: v for k, v in figures.items()
              if k.startswith("gradwire/auto_ratio/")}
    names = {"gradwire/auto_ratio/" + n for n, _ in nets[0].named_parameters()}
    assert set(ratios) == names
    assert all(0 < r <= 1 for r in ratios.values())
    for optimizer in optimizers:
        optimizer.close()


def test_a_real_summary_writer(start_shards, tmp_path):
    tensorboard = pytest.importorskip("torch.utils.tensorboard")
    shards = start_shards(1, 2)
    nets, optimizers = [model(), model()], [None, None]
    train(shards, nets, optimizers, 1)
    writer = tensorboard.SummaryWriter(str(tmp_path))
    gradwire.torch.log_metrics(writer, 1, source=optimizers[0])
    writer.close()
    assert list(tmp_path.glob("events.out.tfevents.*"))
    for optimizer in optimizers:
        optimizer.close()


def test_a_python_worker_serves_its_metrics(start_shards, tmp_path):
    shards = start_shards(1, 1)
    port_file = tmp_path / "worker-{rank}.metrics-port"
    env = dict(os.environ, GRADWIRE_METRICS_PORT="0",
               GRADWIRE_METRICS_PORT_FILE=str(port_file), RANK="0")
    done = subprocess.run(
        [sys.executable, str(HERE / "metrics_worker.py"),
         ",".join(s.address for s in shards)],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "worker-0.metrics-port").exists()
    report = json.loads(done.stdout.strip().splitlines()[-1])
    samples, stats = report["samples"], report["stats"]
    assert samples["gradwire_worker_steps_total"] == 3
    assert samples["gradwire_worker_sent_bytes_total"] >= stats["pushed_bytes"]
    assert "gradwire_worker_residual_norm" in samples
    assert "process_resident_memory_bytes" in samples


def test_a_bad_metrics_port_names_the_variable(start_shards):
    shards = start_shards(1, 1)
    env = dict(os.environ, GRADWIRE_METRICS_PORT="http")
    done = subprocess.run(
        [sys.executable, str(HERE / "metrics_worker.py"),
         ",".join(s.address for s in shards)],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "GRADWIRE_METRICS_PORT='http': expected a TCP port" in done.stderr


def test_the_endpoint_lingers_when_the_script_ends(start_shards, tmp_path):
    """GRADWIRE_METRICS_LINGER_SECONDS (gradwire run --dashboard) keeps
    /metrics up after the script's last line, with its final counts."""
    shards = start_shards(1, 1)
    port_file = tmp_path / "worker-0.metrics-port"
    env = dict(os.environ, GRADWIRE_METRICS_PORT="0",
               GRADWIRE_METRICS_PORT_FILE=str(port_file), RANK="0",
               GRADWIRE_METRICS_LINGER_SECONDS="5")
    process = subprocess.Popen(
        [sys.executable, str(HERE / "metrics_worker.py"),
         ",".join(s.address for s in shards)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        report = json.loads(process.stdout.readline())
        last_line = time.monotonic()
        assert report["samples"]["gradwire_worker_steps_total"] == 3
        time.sleep(1.5)
        assert process.poll() is None, process.stderr.read()
        samples = scrape(int(port_file.read_text()))
        assert sum(v for k, v in samples.items()
                   if k.startswith("gradwire_worker_steps_total")) == 3
        assert process.wait(timeout=60) == 0, process.stderr.read()
        assert time.monotonic() - last_line >= 4.5
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("value", ["soon", "-1", "3601", "nan"])
def test_a_bad_linger_names_the_variable(value):
    message = (f"GRADWIRE_METRICS_LINGER_SECONDS={value!r}: expected "
               "seconds from 0 to 3600")
    with pytest.raises(ValueError, match=re.escape(message)):
        gradwire._metrics.serve_from_environment(
            {"GRADWIRE_METRICS_PORT": "0",
             "GRADWIRE_METRICS_LINGER_SECONDS": value})


def test_gradwire_run_gives_each_worker_an_endpoint(tmp_path):
    cli = os.environ.get("GRADWIRE_CLI_BIN",
                         str(HERE.parents[1] / "build" / "bin" / "gradwire"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GRADWIRE_METRICS_")}
    done = subprocess.run(
        [cli, "run", "-n", "2", "--shards", "1", "--run-dir",
         str(tmp_path / "run"), "--", sys.executable,
         str(HERE / "metrics_worker.py")],
        env=env, capture_output=True, text=True, timeout=180)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    for rank in (0, 1):
        assert f"worker {rank} metrics at http://127.0.0.1:" in output, \
            output[-3000:]
        port = int((tmp_path / "run" /
                    f"worker-{rank}.metrics-port").read_text())
        assert f"worker {rank} metrics at http://127.0.0.1:{port}/metrics" \
            in output
    reports = [json.loads(line.split("] ", 1)[1])
               for line in done.stdout.splitlines() if '"samples"' in line]
    assert len(reports) == 2
    assert all(r["samples"]["gradwire_worker_steps_total"] == 3
               for r in reports)
