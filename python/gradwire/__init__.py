"""gradwire: compressed gradients over gRPC parameter-server shards.

A script started by ``gradwire run -n WORKERS -- python SCRIPT`` learns
its place in the job from the environment (``gradwire.init()``; the
variables are in gradwire._env's doc), so it needs no new flags. Two ways
to train a PyTorch model through gradwire:

* ``gradwire.torch.DistributedOptimizer``: wrap your own optimizer; the
  shards only aggregate the compressed gradients and your ``torch.optim``
  optimizer steps on the result (LR schedulers and gradient clipping keep
  working)::

      gradwire.init()
      optimizer = gradwire.torch.DistributedOptimizer(optimizer, model)

* ``gradwire.ParameterSync``: the shards run the optimizer. Register the
  model's parameters, then call ``sync.step()`` after ``loss.backward()``
  instead of ``optimizer.step()``::

      sync = gradwire.ParameterSync(
          compression=gradwire.Compression("topk", ratio=0.01),
          optimizer="sgd", lr=0.1)
      sync.register(model.named_parameters())
      for x, y in loader:
          model.zero_grad()
          loss_fn(model(x), y).backward()
          sync.step()

The engine is C++ (``gradwire._C``); this package adds the gradient hooks
that overlap pushes with the backward pass. ``gradwire.settings()`` lists
every setting (name, type, default, range, help).
"""

from gradwire import _C
from gradwire._C import Error, SyncStats, settings, tune_heap
from gradwire.datasets import FASHION_MNIST_DIR, load_fashion_mnist
from gradwire._sync import ParameterSync
from gradwire._env import (Environment, init, local_rank, local_size, rank,
                           shard_addresses, size)
from gradwire.compression import Compression

__version__ = _C.__version__

__all__ = [
    "FASHION_MNIST_DIR",
    "Compression",
    "Environment",
    "Error",
    "ParameterSync",
    "SyncStats",
    "init",
    "local_rank",
    "local_size",
    "rank",
    "settings",
    "shard_addresses",
    "size",
    "load_fashion_mnist",
    "tune_heap",
    "__version__",
]
from gradwire import torch  # noqa: E402  gradwire.torch.DistributedOptimizer
