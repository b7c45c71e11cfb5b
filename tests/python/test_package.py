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
    for option in ("shards", "worker_id", "num_workers", "compressor",
                   "ratio", "value_type", "error_feedback", "optimizer",
                   "lr", "momentum", "weight_decay", "mode", "staleness",
                   "pull", "pull_ratio", "pull_value_type", "partition_bytes", "local_rank",
                   "local_size", "rpc_timeout_seconds",
                   "pull_timeout_seconds", "tls_ca", "auth_token_file",
                   "overlap", "backward_passes_per_step"):
        assert option in text, option


def test_the_optimizer_wrapper_is_importable():
    import torch
    assert issubclass(gradwire.torch.DistributedOptimizer,
                      torch.optim.Optimizer)


def test_fashion_mnist_reader_errors_are_clear(tmp_path):
    try:
        gradwire.load_fashion_mnist(str(tmp_path), train=True)
    except gradwire.Error as e:
        assert str(tmp_path) in str(e)
    else:
        raise AssertionError("an empty folder was read as a data set")
