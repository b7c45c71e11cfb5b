"""The real-model examples (examples/python/resnet/ and gpt/): each is a
plain PyTorch script (original.py) that runs under DDP as written, and its
gradwire port (train.py) differs from it in a few lines and runs under
`gradwire run`. A few steps of a small configuration each way, as real
processes: DDP ranks over gloo on a port the OS picked, `gradwire run` with
its own shards.

The GPT's causal mask is a buffer of -inf, which the shards refuse as
initial values: the gradwire run passes only because DistributedOptimizer
leaves such a constant buffer out of the broadcast.
"""

import difflib
import json
import os
import pathlib
import socket
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"
CLI = pathlib.Path(os.environ.get("GRADWIRE_CLI_BIN")
                   or ROOT / "build" / "bin" / "gradwire")
PYTHONPATH = os.environ.get("PYTHONPATH") or str(ROOT / "build" / "python")
PYTHON = "/usr/bin/python3"
# The rule of the ports: at most this many changed lines of code.
MAX_CHANGED_LINES = 10

SMALL = {
    "resnet": ["--steps=2", "--batch-size=4", "--train-limit=64",
               "--test-limit=16", "--log-interval=1"],
    "gpt": ["--steps=3", "--batch-size=2", "--block-size=16", "--n-layer=1",
            "--n-head=2", "--d-model=32", "--eval-batches=1",
            "--log-interval=1"],
}
NEEDS = {
    "resnet": pathlib.Path("/usr/share/datasets/fashion-mnist"),
    "gpt": pathlib.Path("/usr/share/doc/python3.11/html/_sources"),
}


def code_lines(path):
    """The script without its module docstring (which says what differs)."""
    text = path.read_text()
    end = text.index('"""', text.index('"""') + 3) + 3
    return text[end:].splitlines()


def changed_lines(model):
    diff = difflib.unified_diff(code_lines(EXAMPLES / model / "original.py"),
                                code_lines(EXAMPLES / model / "train.py"),
                                lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-"
            and not line.startswith(("+++", "---"))]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GRADWIRE_") or k.endswith("_BIN")}
    env.update(PYTHONPATH=PYTHONPATH, OMP_NUM_THREADS="1", **extra)
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_summaries(tmp_path, workers):
    return [json.loads((tmp_path / f"summary-{r}.json").read_text())
            for r in range(workers)]


def assert_same_weights(summaries):
    """Every rank stepped on the same mean: the weights agree to the bit."""
    sums = [s["weights_sum"] for s in summaries]
    assert len(set(sums)) == 1, f"the ranks' weights differ: {sums}"


def skip_without_data(model):
    if not NEEDS[model].exists():
        pytest.skip(f"{NEEDS[model]} is missing (scripts/install-deps.sh)")


@pytest.mark.parametrize("model", ["resnet", "gpt"])
def test_the_port_changes_few_lines(model):
    changed = changed_lines(model)
    assert 0 < len(changed) <= MAX_CHANGED_LINES, "\n".join(changed)
    assert any("DistributedOptimizer" in line for line in changed)


@pytest.mark.parametrize("model", ["resnet", "gpt"])
def test_original_runs_under_ddp(model, tmp_path):
    skip_without_data(model)
    env = clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                    WORLD_SIZE="2")
    summary = f"--summary={tmp_path}/summary-{{rank}}.json"
    ranks = [subprocess.Popen([PYTHON, "original.py", *SMALL[model], summary],
                              cwd=EXAMPLES / model,
                              env=dict(env, RANK=str(rank)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for rank in range(2)]
    outputs = [p.communicate(timeout=240)[0] for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], "\n".join(outputs)
    summaries = read_summaries(tmp_path, 2)
    assert [s["world_size"] for s in summaries] == [2, 2]
    assert_same_weights(summaries)


# The defaults, and low-rank factors (4-d convolutions and BatchNorm; a
# tied embedding and AdamW, whose gradients it then exchanges).
@pytest.mark.parametrize("model,compression", [
    ("resnet", None), ("gpt", None), ("resnet", "powersgd,rank=2"),
    ("gpt", "powersgd,rank=2,dense_below=0")])
def test_port_runs_under_gradwire_run(model, compression, tmp_path):
    skip_without_data(model)
    summary = f"--summary={tmp_path}/summary-{{rank}}.json"
    env = clean_env()
    if compression:
        env["GRADWIRE_COMPRESSION"] = compression
    result = subprocess.run(
        [str(CLI), "run", "-n", "2", "--shards", "2", "--", PYTHON,
         "train.py", *SMALL[model], summary],
        cwd=EXAMPLES / model, env=env, capture_output=True,
        text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    summaries = read_summaries(tmp_path, 2)
    steps = int(SMALL[model][0].split("=")[1])
    assert all(s["steps"] == steps for s in summaries)
    metric = "test_accuracy" if model == "resnet" else "test_perplexity"
    assert metric in summaries[0]
    assert_same_weights(summaries)
    # The workers' summaries (GRADWIRE_SUMMARY_JSON) make gradwire run's
    # report: training steps (powersgd's second exchange is part of its
    # step) and the bytes against dense fp32.
    report = result.stderr
    assert f"2 workers, 2 shards, {steps} steps\n" in report, report
    assert "dense fp32 would be" in report, report


def test_missing_corpus_names_the_package(tmp_path):
    result = subprocess.run(
        [PYTHON, "original.py", *SMALL["gpt"],
         f"--corpus-dir={tmp_path}/nothing"], cwd=EXAMPLES / "gpt",
        env=clean_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "apt-get install python3.11-doc" in result.stderr
