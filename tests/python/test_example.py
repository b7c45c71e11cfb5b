"""Smoke tests of the Python workers: examples/python/train.py, the short
example a user copies, under `gradwire run`; and bench/python/worker.py, the
full-featured worker (gradwire-worker's flags and summary) that the
benchmarks use.

Each test starts real processes: one gradwire-server shard on an OS-chosen
port (conftest.py's start_shards, stopped in teardown) and two worker.py
workers, or two worker.py processes in --baseline=ddp mode, or `gradwire
run` or `gradwire local` with their own shards, on a few hundred
Fashion-MNIST examples.

The binaries: $GRADWIRE_SERVER_BIN, $GRADWIRE_WORKER_BIN and
$GRADWIRE_CLI_BIN, else build/bin/gradwire-server, gradwire-worker and
gradwire of this checkout.
The workers import gradwire from $PYTHONPATH, else from build/python.
"""

import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "python" / "train.py"
WORKER_PY = ROOT / "bench" / "python" / "worker.py"
WORKER = pathlib.Path(os.environ.get("GRADWIRE_WORKER_BIN")
                      or ROOT / "build" / "bin" / "gradwire-worker")
CLI = pathlib.Path(os.environ.get("GRADWIRE_CLI_BIN")
                   or ROOT / "build" / "bin" / "gradwire")
PYTHONPATH = os.environ.get("PYTHONPATH") or str(ROOT / "build" / "python")
DATA_DIR = "/usr/share/datasets/fashion-mnist"

pytestmark = pytest.mark.skipif(
    not (pathlib.Path(DATA_DIR) / "train-images-idx3-ubyte.gz").exists(),
    reason=f"the Fashion-MNIST data set is missing in {DATA_DIR} "
    "(apt-get install dataset-fashion-mnist)")

# Small and fast: 5 steps of the MLP on 512 training examples (4 steps of
# 64 per worker and epoch: the 5th step is in the second epoch).
SMALL_RUN = ["--model=mlp", "--epochs=2", "--max-steps=5",
             "--train-limit=512", "--test-limit=256", "--progress=log",
             "--threads=1"]
# What a --summary-json must hold: gradwire local's required numbers
# (cli/cluster_summary.cc) and the fingerprint.
SUMMARY_NUMBERS = ("steps", "wall_seconds", "pushed_bytes", "pulled_bytes",
                   "dense_equivalent_bytes")
MLP_PARAMETERS = 784 * 128 + 128 + 128 * 10 + 10


def about_dense_fp32(count, steps, workers=1):
    """dense_equivalent_bytes counts dense fp32 push messages: the values
    and a few bytes of message framing."""
    values = workers * steps * 4 * MLP_PARAMETERS
    return values <= count < 1.01 * values


def worker_env():
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    # Flags may come from GRADWIRE_<NAME>; none must leak into the tests.
    for name in list(env):
        if name.startswith("GRADWIRE_") and name not in (
                "GRADWIRE_SERVER_BIN", "GRADWIRE_WORKER_BIN",
                "GRADWIRE_CLI_BIN", "GRADWIRE_VERSION"):
            del env[name]
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def shard(start_shards):
    """One gradwire-server shard for two workers (conftest.py); its
    address."""
    return start_shards(1, 2)[0].address


def run_workers(commands, timeout=120, program=None):
    """Runs worker.py (or `program`) with each command line at once;
    returns [(exit code, output)]."""
    program = program or [sys.executable, str(WORKER_PY)]
    processes = [subprocess.Popen(
        program + command, env=worker_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for command in commands]
    results = []
    try:
        for process in processes:
            output, _ = process.communicate(timeout=timeout)
            results.append((process.returncode, output))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return results


def read_summaries(results, paths):
    for code, output in results:
        assert code == 0, output
    summaries = [json.loads(path.read_text()) for path in paths]
    for summary in summaries:
        for key in SUMMARY_NUMBERS:
            assert isinstance(summary[key], (int, float)), (key, summary)
        assert re.fullmatch(r"[0-9a-f]{16}", summary["weights_fingerprint"])
        assert summary["steps"] == 5, summary
    assert 0 <= summaries[0]["test_accuracy"] <= 1
    return summaries


def test_two_workers_train_in_lockstep(shard, tmp_path):
    paths = [tmp_path / f"worker-{i}.json" for i in range(2)]
    # gradwire local's flags, in gradwire-worker's spellings.
    local_flags = ["--metrics-address=127.0.0.1", "--metrics-port=0",
                   f"--metrics-port-file={tmp_path}/ignored"]
    results = run_workers([
        [f"--shards={shard}", "--worker-id=0", "--num-workers=2",
         f"--summary-json={paths[0]}"] + local_flags + SMALL_RUN
        + ["--compressor=topk", "--ratio=0.01", "--error-feedback"],
        [f"--shards={shard}", "--worker-id", "1", "--num_workers=2",
         f"--summary-json={paths[1]}"] + local_flags + ["--noevaluate"]
        + SMALL_RUN + ["--compressor", "topk", "--ratio=0.01",
                       "--error-feedback=true"],
    ])
    first, second = read_summaries(results, paths)
    assert "test_accuracy" not in second
    # BSP: both hold the same weights after every step.
    assert first["weights_fingerprint"] == second["weights_fingerprint"]
    for summary in (first, second):
        assert about_dense_fp32(summary["dense_equivalent_bytes"], 5)
        assert 0 < summary["pushed_bytes"] < summary["dense_equivalent_bytes"]
        assert summary["pulled_bytes"] > 0
        assert summary["api"] == "sync" and summary["overlap"] is True
    assert "worker 0 done: 5 steps" in results[0][1]


def test_python_worker_reproduces_the_cpp_worker(start_shards, tmp_path):
    """The same flags give gradwire-worker's weights bit for bit: the same
    data split, batch order, initial weights and fingerprint."""
    assert WORKER.exists(), f"{WORKER} is missing: build it (make build)"
    summaries = {}
    for name, program in (("cpp", [str(WORKER)]), ("python", None)):
        paths = [tmp_path / f"{name}-{i}.json" for i in range(2)]
        shard = start_shards(1, 2)[0]
        results = run_workers(
            [[f"--shards={shard.address}", f"--worker-id={i}",
              "--num-workers=2", f"--summary-json={paths[i]}",
              "--metrics-port=-1", "--seed=7"]
             + [flag for flag in SMALL_RUN if flag != "--threads=1"]
             for i in range(2)], program=program)
        summaries[name] = read_summaries(results, paths)
        # A fresh shard for the second run: start_shards names its port
        # files by shard id, so the old ones must go before the next start.
        shard.stop()
        shard.port_file.unlink(missing_ok=True)
        shard.metrics_port_file.unlink(missing_ok=True)
    cpp, python = summaries["cpp"][0], summaries["python"][0]
    for key in ("weights_fingerprint", "test_accuracy", "final_loss",
                "dense_equivalent_bytes"):
        assert cpp[key] == python[key], (key, cpp, python)


def test_distributed_optimizer_without_overlap(shard, tmp_path):
    paths = [tmp_path / f"worker-{i}.json" for i in range(2)]
    results = run_workers([
        [f"--shards={shard}", f"--worker-id={i}", "--num-workers=2",
         f"--summary-json={paths[i]}", "--api=optimizer", "--nooverlap"]
        + SMALL_RUN for i in range(2)])
    first, second = read_summaries(results, paths)
    assert first["weights_fingerprint"] == second["weights_fingerprint"]
    assert first["api"] == "optimizer" and first["overlap"] is False
    assert 0 < first["pushed_bytes"] < first["dense_equivalent_bytes"]


def test_ddp_baseline(tmp_path):
    paths = [tmp_path / f"worker-{i}.json" for i in range(2)]
    master = f"--ddp-master=127.0.0.1:{free_port()}"
    results = run_workers([
        ["--baseline=ddp", master, f"--worker-id={i}", "--num-workers=2",
         f"--summary-json={paths[i]}"] + SMALL_RUN for i in range(2)])
    first, second = read_summaries(results, paths)
    assert first["weights_fingerprint"] == second["weights_fingerprint"]
    # Computed, not measured: the dense fp32 gradient every step.
    assert first["pushed_bytes"] == first["dense_equivalent_bytes"] \
        == 5 * 4 * MLP_PARAMETERS
    assert first["api"] == "ddp" and "byte_counts" in first


def test_bad_flags_exit_2(tmp_path):
    results = run_workers([["--model=vgg"], ["--no-such-flag=1"],
                           ["--worker-id=2", "--num-workers=2"],
                           ["--train-limit=10", "--max-steps=1"]])
    for code, output in results:
        assert code == 2, output
    assert "--model" in results[0][1]
    assert "do not fill one batch" in results[3][1]


def test_gradwire_error_exits_1(tmp_path):
    [(code, output)] = run_workers([
        [f"--data-dir={tmp_path}/missing", "--shards=127.0.0.1:1"]
        + SMALL_RUN])
    assert code == 1, output
    assert "worker 0: Fashion-MNIST not found" in output


def test_gradwire_local_accepts_python_workers(tmp_path):
    """`gradwire local --worker-command` with worker.py: it passes its flags,
    and reads and adds up the Python workers' summaries."""
    assert CLI.exists(), f"{CLI} is missing: build it (make build)"
    summary = tmp_path / "cluster.json"
    result = subprocess.run(
        [str(CLI), "local", "--shards=1", "--workers=2",
         f"--worker-command={sys.executable} {WORKER_PY}",
         f"--summary-json={summary}", f"--log-dir={tmp_path}/run"]
        + SMALL_RUN, env=worker_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=120)
    assert result.returncode == 0, result.stdout
    cluster = json.loads(summary.read_text())
    assert cluster["workers"] == 2 and cluster["steps"] == 5
    assert about_dense_fp32(cluster["dense_equivalent_bytes"], 5, workers=2)
    assert 0 <= cluster["test_accuracy"] <= 1


def test_example_trains_under_gradwire_run(tmp_path):
    """examples/python/train.py as its docstring runs it: 2 workers and 2
    shards under `gradwire run`, a few steps, progress lines and worker 0's
    test accuracy."""
    assert CLI.exists(), f"{CLI} is missing: build it (make build)"
    result = subprocess.run(
        [str(CLI), "run", "-n", "2", "--shards", "2", "--run-dir",
         str(tmp_path / "run"), "--", sys.executable, str(EXAMPLE),
         "--max-steps=6", "--log-interval=3", "--train-limit=1024",
         "--test-limit=500"],
        env=worker_env(), cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=120)
    output = result.stdout
    assert result.returncode == 0, output[-4000:]
    assert "[0] epoch 1/1 step 3/6 loss " in output, output[-4000:]
    assert "[0] epoch 1/1 step 6/6 loss " in output, output[-4000:]
    for rank in (0, 1):
        assert f"[{rank}] worker {rank}: 6 steps in " in output, output[-4000:]
    [accuracy] = [line for line in output.splitlines()
                  if line.startswith("[0] test accuracy ")]
    assert 0 <= float(accuracy.split()[-1]) <= 1, accuracy


def test_example_is_short():
    assert len(EXAMPLE.read_text().splitlines()) <= 300
