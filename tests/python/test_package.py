"""The package itself: import, version, documentation."""

import os
import pydoc

import gradwire


def test_version_is_the_project_version():
    assert gradwire.__version__ == os.environ.get("GRADWIRE_VERSION",
                                                  gradwire.__version__)
    assert gradwire.__version__.count(".") == 2


def test_help_explains_every_argument():
    text = pydoc.render_doc(gradwire.ParameterSync, renderer=pydoc.plaintext)
    for option in ("shards", "node_rank", "num_nodes", "compressor",
                   "ratio", "value_type", "error_feedback", "optimizer",
                   "lr", "momentum", "weight_decay", "mode", "staleness",
                   "pull", "pull_ratio", "pull_value_type", "partition_bytes", "local_rank",
                   "local_size", "rpc_timeout_seconds",
                   "pull_timeout_seconds", "tls_ca", "auth_token_file",
                   "allow_insecure_token",
                   "overlap", "backward_passes_per_step"):
        assert option in text, option


def test_the_optimizer_wrapper_is_importable():
    import torch
    assert issubclass(gradwire.torch.DistributedOptimizer,
                      torch.optim.Optimizer)


def test_fashion_mnist_reader_errors_are_clear(tmp_path):
    try:
        gradwire.datasets.load_fashion_mnist(str(tmp_path), train=True)
    except FileNotFoundError as e:
        assert str(tmp_path) in str(e)
        assert "dataset-fashion-mnist" in str(e)
    else:
        raise AssertionError("an empty folder was read as a data set")


def test_fashion_mnist_reader_refuses_a_corrupt_file(tmp_path):
    import gzip
    import struct
    # A labels header (magic 0x801) where the images' header belongs.
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        with gzip.open(tmp_path / name, "wb") as f:
            f.write(struct.pack(">4I", 0x801, 1, 28, 28) + bytes(784))
    try:
        gradwire.datasets.load_fashion_mnist(str(tmp_path), train=True)
    except gradwire.datasets.BadDataFile as e:
        assert isinstance(e, OSError)
        assert "train-images-idx3-ubyte.gz" in str(e)
        assert "magic" in str(e)
    else:
        raise AssertionError("a labels file was read as images")


def test_the_top_level_names_are_the_documented_surface():
    assert sorted(gradwire.__all__) == sorted([
        "Compression", "Environment", "Error", "ParameterSync", "SyncStats",
        "init", "local_rank", "local_size", "rank", "settings",
        "shard_addresses", "size", "datasets", "tuning", "__version__"])
    assert gradwire.datasets.FASHION_MNIST_DIR == \
        "/usr/share/datasets/fashion-mnist"


def _tune_heap_in_a_child(env_extra):
    """gradwire.tuning.tune_heap() in a fresh interpreter (it changes the whole
    process), with `env_extra` added to the environment."""
    import subprocess
    import sys
    env = {key: value for key, value in os.environ.items()
           if key not in ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_",
                          "MALLOC_TRIM_THRESHOLD_")}
    env.update(env_extra)
    out = subprocess.run(
        [sys.executable, "-c",
         "import gradwire; print(gradwire.tuning.tune_heap())"],
        env=env, check=True, capture_output=True, text=True).stdout
    return out.strip()


def test_tune_heap_raises_the_thresholds_unless_the_environment_sets_them():
    assert _tune_heap_in_a_child({}).startswith("(True, 'heap: blocks up to")
    given = _tune_heap_in_a_child(
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1048576"})
    assert given.startswith("(False,") and "environment" in given, given
