"""The README's Python example runs as the README shows it, on a fresh
checkout: its shell block, copied out of README.md, in a copy of the
example's folder beside the build, with --dry-run added to the training
command (one batch per epoch) to keep the test short."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from gradwire.datasets import prepare_torchvision_fashion_mnist

ROOT = pathlib.Path(__file__).resolve().parents[2]


def readme_python_block():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
    found = [b for b in blocks if "train.py --epochs=1" in b]
    assert len(found) == 1, "README.md: no single block running train.py"
    return found[0]


def test_the_readme_python_example_runs_as_written(tmp_path):
    cli = pathlib.Path(os.environ.get(
        "GRADWIRE_CLI_BIN", ROOT / "build" / "bin" / "gradwire")).resolve()
    build = cli.parent.parent
    # The layout the README's relative paths expect: the repository root
    # holding examples/ and build/.
    example = tmp_path / "examples" / "python" / "mnist"
    shutil.copytree(ROOT / "examples" / "python" / "mnist", example)
    (tmp_path / "build").symlink_to(build)
    script = readme_python_block().replace("train.py --epochs=1",
                                           "train.py --epochs=1 --dry-run")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(["bash", "-euc", script], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout[-3000:] +
                                    result.stderr[-3000:])
    assert (tmp_path / "examples" / "python" / "data" / "FashionMNIST" /
            "raw" / "train-images-idx3-ubyte").is_file()
    assert re.search(r"Test set: Average loss", result.stdout), result.stdout


def test_prepare_data_refuses_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        prepare_torchvision_fashion_mnist(tmp_path / "out",
                                          data_dir=tmp_path / "none")
    usage = subprocess.run([sys.executable, "-m", "gradwire.prepare_data"],
                           capture_output=True, text=True)
    assert usage.returncode == 2
    assert "usage: python3 -m gradwire.prepare_data ROOT" in usage.stderr
