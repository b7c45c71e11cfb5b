"""`pip install ./python` as a user runs it: into a fresh virtualenv, then
`import gradwire` from outside the source and build trees, without the
PYTHONPATH the other tests use, training two steps against a real shard."""

import json
import os
import pathlib
import subprocess

from conftest import ROOT

# The CTest entry names the build directory; pip reuses it, so that the
# install compiles nothing.
BUILD_DIR = pathlib.Path(os.environ.get("GRADWIRE_BUILD_DIR",
                                        str(ROOT / "build")))

# Runs in the virtualenv; prints what it found as JSON.
USER_SCRIPT = """
import json, sys
import torch
import gradwire
import gradwire._C

images, labels = gradwire.datasets.load_fashion_mnist(train=False, limit=16)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))
sync = gradwire.ParameterSync(shards=[sys.argv[1]], node_rank=0,
                              num_nodes=1,
                              compression=gradwire.Compression("topk",
                                                               ratio=0.1),
                              optimizer="sgd", lr=0.1)
sync.register(model.named_parameters())
before = model[1].weight.detach().clone()
for step in range(2):
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(images), labels).backward()
    sync.step()
sync.await_weights()
print(json.dumps({
    "package": gradwire.__file__, "extension": gradwire._C.__file__,
    "version": gradwire.__version__, "images": list(images.shape),
    "labels": str(labels.dtype), "steps": sync.stats.steps,
    "moved": not torch.equal(before, model[1].weight),
    "tuning": gradwire.tuning.tune_heap is gradwire._C.tune_heap,
}))
sync.close()
"""


def clean_environment(**extra):
    """Only what a user's shell would have: no PYTHONPATH, no PYTHONHOME."""
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update(extra)
    return env


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True,
                            **kwargs)
    assert result.returncode == 0, (
        f"{command} exited with {result.returncode}:\n{result.stdout}\n"
        f"{result.stderr}")
    return result.stdout


def make_virtualenv(directory):
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages",
         str(directory)], env=clean_environment())
    return directory / "bin" / "python"


def pip_install(venv, *options):
    """`pip install ./python` in `venv`, reusing the build directory;
    returns the finished process."""
    env = clean_environment(GRADWIRE_CMAKE_BUILD_DIR=str(BUILD_DIR),
                            PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--no-build-isolation",
         "--no-index", *options, str(ROOT / "python")],
        env=env, cwd=venv, capture_output=True, text=True)


def runpaths(library):
    """The RPATH and RUNPATH entries of a shared library."""
    dynamic = run(["readelf", "-d", str(library)])
    return [line for line in dynamic.splitlines()
            if "(RPATH)" in line or "(RUNPATH)" in line]


def test_pip_install_into_a_virtualenv_and_train(tmp_path, start_shards):
    venv = tmp_path / "venv"
    python = make_virtualenv(venv)
    installed = pip_install(venv)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    shard = start_shards(1, 1)[0]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    found = json.loads(run([str(python), "-c", USER_SCRIPT, shard.address],
                           env=clean_environment(), cwd=outside))

    package_dir = next(venv.glob("lib/python3*/site-packages")) / "gradwire"
    assert pathlib.Path(found["package"]).parent == package_dir
    assert pathlib.Path(found["extension"]).parent == package_dir
    assert found["version"] == os.environ.get("GRADWIRE_VERSION",
                                              found["version"])
    assert found["images"] == [16, 1, 28, 28]
    assert found["labels"] == "torch.int64"
    assert found["tuning"]
    assert found["steps"] == 2 and found["moved"]
    # gradwire's own code is inside _C: nothing may point into the build
    # tree, where a user's machine has nothing.
    for line in runpaths(found["extension"]):
        assert str(BUILD_DIR) not in line and str(ROOT) not in line, line


def test_pip_names_a_missing_torch(tmp_path):
    # A virtualenv without the system's packages has no torch.
    venv = tmp_path / "bare"
    run(["/usr/bin/python3", "-m", "venv", str(venv)],
        env=clean_environment())
    result = pip_install(venv)
    assert result.returncode != 0
    assert "has no torch" in result.stdout + result.stderr
