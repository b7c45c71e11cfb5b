"""Checkpoints of a gradwire job, one file per process: the model, the
state dict of the DistributedOptimizer or ParameterSync (gradwire's part
in one layout, _state_dict.py) and the caller's extras. With the shards'
own checkpoint directory (gradwire-server --checkpoint-dir, write-ahead
log on) they are what a restart needs. Re-exported as
gradwire.torch.save_checkpoint and load_checkpoint."""

import torch

from gradwire import _env

__all__ = ["save_checkpoint", "load_checkpoint"]


def _rank_path(path):
    return f"{path}.rank{_env.rank()}" if _env.size() > 1 else str(path)


def save_checkpoint(path, model, optimizer, **extra):
    """Saves this process's checkpoint: the model's state dict,
    ``optimizer``'s (a DistributedOptimizer or a ParameterSync: with this
    node's compression state under "gradwire") and ``extra`` (epoch,
    scheduler state...), to ``path`` + ".rank<RANK>" when the job has
    several processes. Every process calls it after the same step; with
    the shards' own checkpoint directory (gradwire-server
    --checkpoint-dir, write-ahead log on) it is what a restart needs."""
    torch.save({"model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "extra": extra}, _rank_path(path))


def load_checkpoint(path, model, optimizer):
    """Loads what save_checkpoint wrote for this process into ``model``
    and ``optimizer`` (a DistributedOptimizer right after it was made, a
    ParameterSync right after register()) and returns ``extra``. A
    checkpoint of the release before loads too. Errors as
    ``optimizer.load_state_dict``."""
    saved = torch.load(_rank_path(path))
    optimizer.load_state_dict(saved["optimizer"])
    model.load_state_dict(saved["model"])
    return saved["extra"]
