"""gradwire: compressed gradients over gRPC parameter-server shards.

Two ways to train a PyTorch model through gradwire:

* ``gradwire.ParameterSync``: the shards run the optimizer. Register the
  model's parameters, then call ``sync.step()`` after ``loss.backward()``
  instead of ``optimizer.step()``::

      sync = gradwire.ParameterSync(shards=["10.0.0.1:7000"], worker_id=rank,
                                    num_workers=world, compressor="topk",
                                    ratio=0.01, optimizer="sgd", lr=0.1)
      sync.register(model.named_parameters())
      for x, y in loader:
          model.zero_grad()
          loss_fn(model(x), y).backward()
          sync.step()

* ``gradwire.torch.DistributedOptimizer``: the shards only aggregate the
  compressed gradients and any local ``torch.optim`` optimizer steps on the
  result (LR schedulers and gradient clipping keep working).

The engine is C++ (``gradwire._C``); this package adds the gradient hooks
that overlap pushes with the backward pass.
"""

from gradwire import _C
from gradwire._C import Error, SyncStats, tune_heap
from gradwire.datasets import FASHION_MNIST_DIR, load_fashion_mnist
from gradwire._sync import ParameterSync

__version__ = _C.__version__

__all__ = [
    "FASHION_MNIST_DIR",
    "Error",
    "ParameterSync",
    "SyncStats",
    "load_fashion_mnist",
    "tune_heap",
    "__version__",
]
from gradwire import torch  # noqa: E402  gradwire.torch.DistributedOptimizer
