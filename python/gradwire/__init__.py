"""gradwire: compressed gradients over gRPC parameter-server shards.

A script started by ``gradwire run -n N -- python SCRIPT`` (N processes)
learns its place in the job from the environment (``gradwire.init()``;
the variables are in gradwire._env's doc), so it needs no new flags. A
process is a rank of the job's world size (``rank()``, ``size()``); a
node is a host, whose processes push together (``node_rank``,
``num_nodes``). Two ways
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
every setting (name, type, default, range, help); ``gradwire.tuning``
holds the knobs a script rarely needs, ``gradwire.datasets`` the
Fashion-MNIST reader.
"""

import importlib

from gradwire import _C, _renamed, datasets, tuning
from gradwire._C import Error, SyncStats, settings
from gradwire._public_sync import ParameterSync
from gradwire._env import (Environment, init, local_rank, local_size, rank,
                           shard_addresses, size)
from gradwire.compression import Compression

__version__ = _C.__version__

__all__ = [
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
    "datasets",
    "tuning",
    "__version__",
]


def __getattr__(name):
    # The names that moved (gradwire.tune_heap, ...) warn once and still
    # work for one release (_renamed.py).
    return _renamed.moved_attribute(name)


# Last, since it needs the names above: binds gradwire.torch
# (DistributedOptimizer) without a name pyflakes would call unused.
importlib.import_module("gradwire.torch")
