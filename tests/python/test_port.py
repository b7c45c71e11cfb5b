"""A user's own script, ported: examples/python/mnist/train.py is the
classic PyTorch MNIST example (original.py beside it) with a handful of
changed lines, run as users run it, under `gradwire run`, with its argv
untouched."""

import difflib
import gzip
import os
import pathlib
import struct
import subprocess
import sys

import torch

import gradwire

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "python" / "mnist"
MAX_CHANGED_LINES = 10


def code_lines(path):
    return [line for line in path.read_text().splitlines()
            if not line.startswith("#")]


def test_the_port_changes_few_lines():
    diff = [line for line in difflib.unified_diff(
        code_lines(EXAMPLE / "original.py"), code_lines(EXAMPLE / "train.py"),
        lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert 0 < len(diff) <= MAX_CHANGED_LINES, "\n".join(diff)


def fashion_mnist_in_torchvision_layout(data, train, test):
    """The first `train` and `test` examples of Debian's Fashion-MNIST as
    torchvision's FashionMNIST reads them (uncompressed IDX files in
    data/FashionMNIST/raw): a whole epoch of a few dozen steps."""
    raw = data / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, count in (("train", train), ("t10k", test)):
        for kind, header, size in (("images-idx3", 16, 28 * 28),
                                   ("labels-idx1", 8, 1)):
            name = f"{prefix}-{kind}-ubyte"
            with gzip.open(pathlib.Path(gradwire.datasets.FASHION_MNIST_DIR) /
                           f"{name}.gz") as source:
                head = bytearray(source.read(header))
                body = source.read(count * size)
            head[4:8] = struct.pack(">I", count)  # The example count.
            (raw / name).write_bytes(bytes(head) + body)


def test_the_port_trains_under_gradwire_run(tmp_path):
    fashion_mnist_in_torchvision_layout(tmp_path / "data", 6000, 2000)
    work = tmp_path / "work"
    work.mkdir()
    cli = os.environ.get("GRADWIRE_CLI_BIN",
                         str(ROOT / "build" / "bin" / "gradwire"))
    # 30 steps a worker: one epoch of 6,000 images in batches of 100 over
    # 2 workers.
    result = subprocess.run(
        [cli, "run", "-n", "2", "--shards", "2", "--run-dir",
         str(tmp_path / "run"), "--", sys.executable,
         str(EXAMPLE / "train.py"), "--epochs=1", "--batch-size=100",
         "--log-interval=10", "--save-model"],
        cwd=work, capture_output=True, text=True, timeout=280)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    for rank in (0, 1):
        assert f"[{rank}] Train Epoch: 1 [0/6000" in output, output[-4000:]
        assert f"[{rank}] Train Epoch: 1 [2000/6000" in output, output[-4000:]
    accuracy = [line for line in output.splitlines()
                if line.startswith("[0] Test set:")]
    assert accuracy, output[-4000:]
    # 30 Adadelta steps on half the data each: well above chance (10%).
    print(accuracy[0])
    percent = int(accuracy[0].rsplit("(", 1)[1].split("%")[0])
    assert percent >= 50, accuracy[0]
    # Each worker saved its own checkpoint, with its compression state.
    for rank in (0, 1):
        saved = torch.load(work / f"fashion_mnist_cnn.pt.rank{rank}")
        assert set(saved) == {"model", "optimizer", "extra"}
        gradwire_part = saved["optimizer"]["gradwire"]
        assert gradwire_part["node_rank"] == rank
        assert gradwire_part["next_step"] == 30
