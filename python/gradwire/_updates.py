"""Exchanging updates (DistributedOptimizer's exchange="updates", the
default for adaptive torch optimizers under lossy compression): the wrapped
optimizer steps on the worker's own gradient, its update goes out as the
"gradient", and the shards' SGD at learning rate 1 adds the workers' mean.

The model's parameters are the registered tensors themselves where they
can be (contiguous float32): the shards' weights are pulled straight into
them, and the worker keeps no replica of the model. A step copies them
aside only while it runs (after backward(), when the activations are
gone), a part of them at a time where the optimizer allows it, so a
worker holds what a DDP process holds, its error-feedback residual in
place of DDP's gradient buckets. Other parameters (another
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


# Torch optimizers whose step treats each parameter on its own: stepping
# them a part of the parameters at a time (the others' .grad set aside) is
# the same step, and the copies of the weights from before it then cost a
# part's size instead of the model's.
_STEPS_PER_PARAMETER = tuple(
    getattr(torch.optim, name) for name in (
        "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "NAdam",
        "RAdam", "RMSprop", "Rprop", "ASGD")
    if hasattr(torch.optim, name))
# Parts a step is split into: the copies peak at about 1/STEP_PARTS of the
# registered parameters' bytes (0.5 bytes per float32 parameter), or at
# the largest parameter where that is larger.
STEP_PARTS = 8


def step_parts(optimizer, parameters, own):
    """Lists of indices into `parameters`, in order, each holding about
    1/STEP_PARTS of the elements of the parameters registered themselves
    (`own`); one list with all of them where the optimizer is not one of
    torch's per-parameter optimizers (its exact type: a subclass may couple
    parameters, as a global norm would)."""
    everything = list(range(len(parameters)))
    if type(optimizer) not in _STEPS_PER_PARAMETER:
        return [everything]
    total = sum(p.numel() for p, mine in zip(parameters, own) if mine)
    budget = max(1, -(-total // STEP_PARTS))
    parts, part, size = [], [], 0
    for i in everything:
        part.append(i)
        if own[i]:
            size += parameters[i].numel()
        if size >= budget:
            parts.append(part)
            part, size = [], 0
    if part:
        parts.append(part)
    return parts


@torch.no_grad()
def _step_in_parts(optimizer, parameters, own):
    """Steps `optimizer` on the parameters' gradients, a part at a time
    (step_parts). Each parameter registered itself ends at its weights from
    before the step with -u (what the step took away) in its .grad, in the
    local gradient's storage; the others end stepped, their .grad the local
    gradient. Returns the last step's result."""
    parts = step_parts(optimizer, parameters, own)
    gradients = [p.grad for p in parameters]
    results = list(gradients)
    loss = None
    for part in parts:
        if len(parts) > 1:
            for p in parameters:
                p.grad = None
            for i in part:
                parameters[i].grad = gradients[i]
        kept = [(i, parameters[i].detach().clone()) for i in part if own[i]]
        loss = optimizer.step()
        for i, before in kept:
            p = parameters[i]
            results[i] = (gradients[i] if gradients[i] is not None
                          else torch.empty_like(p))
            torch.sub(before, p, out=results[i])
            p.copy_(before)
        del kept
    for p, result in zip(parameters, results):
        p.grad = result
    return loss


@torch.no_grad()
def step_on_updates(optimizer, parameters, replicas, exchange,
                    finite=True):
    """One step: the parameters (equal to the replicas, the shards'
    weights, at the start) step locally by u; -u goes out as each replica's
    gradient, the replicas take the shards' new weights, and so do the
    parameters. A parameter registered itself has -u written into its
    .grad (the local gradient is spent) and its weights restored before the
    exchange; the copies that takes are made a part of the model at a time
    (step_parts). Where this worker's gradients are not `finite` its
    optimizer does not step (u = 0; _nonfinite.py). Returns the wrapped
    optimizer's step's result."""
    own = [is_registered_itself(p, r) for p, r in zip(parameters, replicas)]
    loss = None
    if finite:
        loss = _step_in_parts(optimizer, parameters, own)
    for p, r, mine in zip(parameters, replicas, own):
        if not mine:
            r.grad = r - p.float()
            continue
        if not finite:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            else:
                p.grad.zero_()
        r.grad = p.grad
    exchange()
    for p, r, mine in zip(parameters, replicas, own):
        if not mine:
            p.copy_(r)
    return loss
