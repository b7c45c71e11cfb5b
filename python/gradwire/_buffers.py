"""The model's buffers under DistributedOptimizer: which are broadcast
from worker 0 at every step, as DDP's broadcast_buffers, and which are
constants that must stay as they were."""

import torch

from gradwire._C import Error


def broadcast_buffers_of(model, broadcast_buffers):
    """The model's buffers, split: ``(broadcast, constant)``, each a list
    of (name, buffer) pairs. Broadcast: the floating-point buffers
    (BatchNorm's running statistics); integer ones, such as BatchNorm's
    num_batches_tracked, count the same on every worker. Constant: those
    holding an infinity or NaN at the start, such as a causal mask of
    -inf: a value the shards refuse is not a statistic that training
    updates, so they are not sent, and step() checks that they stay as
    they were."""
    if broadcast_buffers is None:
        broadcast_buffers = model is not None
    if not broadcast_buffers:
        return [], []
    if model is None:
        raise ValueError(
            "broadcast_buffers: pass the model (DistributedOptimizer("
            "optimizer, model)) so that its buffers are known")
    floating = [(name, b) for name, b in model.named_buffers()
                if b is not None and b.is_floating_point()]
    broadcast = [(n, b) for n, b in floating if bool(b.isfinite().all())]
    constant = [(n, b) for n, b in floating if not bool(b.isfinite().all())]
    return broadcast, constant


def _same(a, b):
    """Equal element for element, NaN equal to NaN."""
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def check_constants(constants):
    """Raises gradwire.Error naming the first (name, buffer, start) whose
    buffer no longer equals its start."""
    for name, buffer, start in constants:
        if not _same(buffer, start):
            raise Error(
                f"FAILED_PRECONDITION: buffer {name} held a non-finite "
                "value at the start, so it is not broadcast (it was "
                "taken for a constant, such as a causal mask), and it "
                "changed; keep statistics that training updates finite "
                "from the start, or pass broadcast_buffers=False")


@torch.no_grad()
def stage_buffers(model_buffers, replicas, worker_id, num_workers,
                  means=False):
    """Sets each buffer replica's .grad for one exchange: worker 0 sends
    W times what moves the replica to its buffer, the others nothing, so
    that every replica becomes worker 0's buffer. With `means` (shards that
    hand the mean on, _aggregation.py) that is W * its buffer: exact for a
    power-of-two W, else within a rounding of it; otherwise, for the shards'
    SGD at lr 1, W * (replica - its buffer)."""
    for (_, b), r in zip(model_buffers, replicas):
        if worker_id != 0:
            r.grad = torch.zeros_like(r)
        elif means:
            r.grad = b.float().mul(num_workers)
        else:
            r.grad = (r - b.float()).mul_(num_workers)
