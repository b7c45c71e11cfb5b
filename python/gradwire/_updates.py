"""Exchanging updates (DistributedOptimizer's exchange="updates", the
default for adaptive torch optimizers under lossy compression): the wrapped
optimizer steps on the worker's own gradient, its update goes out as the
"gradient", and the shards' SGD at learning rate 1 adds the workers' mean.

The model's parameters are the registered tensors themselves where they
can be (contiguous float32): the shards' weights are pulled straight into
them, and the worker keeps no replica of the model. A step copies them
aside only while it runs (after backward(), when the activations are
gone), so a worker holds what a DDP process holds, its error-feedback
residual in place of DDP's gradient buckets. Other parameters (another
dtype, a strided layout) keep a float32 replica, as buffers do.
"""

import torch


def aggregation_tensors(parameters, buffers, exchange_updates):
    """The tensors to register: exchanging updates, each contiguous float32
    parameter itself (detached); float32 contiguous copies of the others
    and of the buffers."""
    def own(p):
        return (exchange_updates and p.dtype == torch.float32
                and p.is_contiguous())
    return [p.detach() if own(p) else p.detach().clone().float().contiguous()
            for p in parameters] + [
        b.detach().clone().float().contiguous() for b in buffers]


def is_registered_itself(parameter, replica):
    """Whether `replica` is `parameter`'s own storage."""
    return (replica.data_ptr() == parameter.data_ptr()
            and replica.shape == parameter.shape
            and replica.dtype == parameter.dtype)


@torch.no_grad()
def step_on_updates(optimizer, parameters, replicas, exchange,
                    finite=True):
    """One step: the parameters (equal to the replicas, the shards'
    weights, at the start) step locally by u; -u goes out as each replica's
    gradient, the replicas take the shards' new weights, and so do the
    parameters. A parameter registered itself has -u written into its
    .grad (the local gradient is spent) and its weights restored before the
    exchange. Where this worker's gradients are not `finite` its optimizer
    does not step (u = 0; _nonfinite.py). Returns the wrapped optimizer's
    step's result."""
    own = [is_registered_itself(p, r) for p, r in zip(parameters, replicas)]
    before = [p.detach().clone() if mine else None
              for p, mine in zip(parameters, own)]
    loss = optimizer.step() if finite else None
    for p, r, kept in zip(parameters, replicas, before):
        if kept is None:
            r.grad = r - p.float()
            continue
        if p.grad is None:
            p.grad = torch.empty_like(p)
        torch.sub(kept, p, out=p.grad)
        p.copy_(kept)
        r.grad = p.grad
    del before
    exchange()
    for p, r, mine in zip(parameters, replicas, own):
        if not mine:
            p.copy_(r)
    return loss
