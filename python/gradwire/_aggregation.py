"""The shards' side of DistributedOptimizer: a ParameterSync whose shards
only average, and the tensors registered with it, one per parameter and
one per buffer. The shards average in one of two ways:

- "means" (optimizer "mean"): exchanging gradients with pulls that keep
  the mean exact (sparsifiers, auto, powersgd, none), each registered
  tensor is an aggregation buffer that a step's pull overwrites with the
  workers' mean, whole. It needs no value from before the step, so it can
  be the parameter's own gradient (DistributedOptimizer.synchronize lets
  ``p.grad`` be it), and the mean is the shards' sum of each push's share,
  bit for bit: with `none`, DDP's mean.
- "replicas" (SGD at learning rate 1, no momentum, no weight decay): each
  registered tensor is a replica of the shards' weights, whose change over
  a step is minus the workers' mean. For the quantizers' compressed delta
  pulls (server-side error feedback needs the replica) and, exchanging
  updates, for the model itself: contiguous float32 parameters are
  registered themselves (_updates.py)."""

import collections

import torch

from gradwire import _C, _env
from gradwire._C import Error
from gradwire._nonfinite import FLAG_NAME, SkipFlag
from gradwire._sync import ParameterSync
from gradwire._updates import aggregation_tensors, is_registered_itself
from gradwire.compression import PULL_KEYS, PUSH_KEYS

# The prefix of the names under which buffers are registered.
BUFFER_PREFIX = "buffer:"
# Options decided here, not by the script: the shards only aggregate.
_RESERVED_KEYS = tuple(s["name"] for s in _C.settings()
                       if s["group"] == "optimizer" and s["keyword"])


def check_sync_options(sync_options):
    """Raises ValueError for a ParameterSync keyword that the wrapped
    optimizer (its own settings) or the compression sets instead."""
    for key in _RESERVED_KEYS:
        if key in sync_options:
            raise ValueError(
                f"{key}: set it on the wrapped optimizer; the shards "
                "only aggregate gradients")
    for key in PUSH_KEYS + PULL_KEYS + ("compressor",):
        if key in sync_options:
            raise ValueError(
                f"{key}: set it in compression=gradwire.Compression(...)")

#: What connect() returns: the ParameterSync, the registered tensors
#: (parameters', then buffers', then the skip flag's, then the low-rank
#: factors'),
#: copies of them kept for the step's "before" values where the sync
#: cannot keep them in .grad (else None), this worker's id, the number of
#: workers, the SkipFlag (_nonfinite.py), and whether the shards hand the
#: means on whole (see above; else they keep replicas).
Aggregation = collections.namedtuple(
    "Aggregation", "sync replicas before worker_id num_workers skip means")


def aggregates_means(compression, exchange_updates):
    """Whether the shards hand each step's mean on whole (optimizer
    "mean"): exchanging gradients (or preconditioned gradients) with a
    pull that keeps the mean exact. The quantizers' compressed delta
    pulls, and exchanged updates, keep replicas."""
    return (not exchange_updates
            and compression.pull_for_aggregation() in ("exact", "dense"))


def stage_gradient(replica, gradient):
    """Sets `gradient` as what `replica` pushes: its .grad, or an alias of
    its storage where it is the replica itself (a tensor cannot be its own
    .grad; see adopt_gradients)."""
    same = gradient.data_ptr() == replica.data_ptr()
    replica.grad = gradient.detach() if same else gradient


def _adoptable(tensor, replica):
    return (tensor.dtype == replica.dtype and tensor.shape == replica.shape
            and tensor.device == replica.device)


@torch.no_grad()
def lend_gradients(parameters, replicas):
    """Before the first backward(): gives each parameter without a gradient
    its registered tensor, zeroed, as ``p.grad``, wherever dtype, shape and
    device allow, so that the first backward() accumulates into it. Without
    it the first step would hold a gradient of backward's own beside the
    registered tensor (and the residual that compression makes then), 4
    bytes per parameter over DDP's first backward."""
    for p, r in zip(parameters, replicas):
        if p.grad is None and _adoptable(p, r):
            p.grad = r.zero_()


@torch.no_grad()
def adopt_gradients(parameters, replicas):
    """At the end of an exchange of means: lets each parameter's gradient
    be its registered tensor (the gradient's values copied there, unless
    it is that tensor already), wherever dtype, shape and device allow.
    From the next step on, backward() accumulates into it (zero_grad()
    zeroes it in place), the step's pull writes the mean into ``p.grad``
    itself, and no copy of the mean stays beside the gradients: a worker
    holds what a DDP process holds. A copy is made only where the gradient
    is another tensor (a script that sets gradients to None, or one that
    had a gradient before lend_gradients ran)."""
    for p, r in zip(parameters, replicas):
        g = p.grad
        if g is None or g.data_ptr() == r.data_ptr() or not _adoptable(g, r):
            continue
        r.copy_(g)
        p.grad = r


def means_of(replicas, gradients, places):
    """After an exchange of means: the mean that each registered tensor at
    `places` holds, written into its gradient of `gradients` where that is
    not the registered tensor itself."""
    for g, i in zip(gradients, places):
        r = replicas[i]
        if g.data_ptr() != r.data_ptr():
            g.copy_(r)


def connect(named, model_buffers, compression, exchange_updates,
            dense_steps, sync_options, factors=()):
    """Connects to the shards and registers `named` parameters and
    `model_buffers` (name, tensor pairs), then `factors` (name, tensor
    pairs of low-rank factors, uncompressed). `dense_steps` (or None) is
    the least number of uncompressed first steps. The script's own
    keywords win over the compression's defaults (such as
    residual_spare)."""
    options = _env.with_environment(sync_options)
    replicas = aggregation_tensors(
        [p for _, p in named], [b for _, b in model_buffers],
        exchange_updates)
    settings = dict(compression.sync_options(aggregation=True), **options)
    if dense_steps is not None:
        settings["dense_steps"] = max(dense_steps,
                                      settings.get("dense_steps", 0))
    # A non-finite gradient skips the step instead of failing it
    # (_nonfinite.py). The flag is registered whatever is exchanged, so that
    # the model's fingerprint does not depend on it.
    means = aggregates_means(compression, exchange_updates)
    skip = SkipFlag(means)
    if not exchange_updates:
        settings.setdefault("non_finite", "zero")
    if means:
        # Answered whole: as sparse as the mean, and exact.
        settings["pull"] = "dense"
    sync = ParameterSync(optimizer="mean" if means else "sgd", lr=1.0,
                         momentum=0.0, weight_decay=0.0, **settings)
    names = [name for name, _ in named] + [
        BUFFER_PREFIX + name for name, _ in model_buffers]
    uncompressed = [compression.pushes_whole(p) for _, p in named] \
        + [True] * len(model_buffers)
    names.append(FLAG_NAME)
    replicas.append(skip.replica)
    uncompressed.append(True)
    for name, factor in factors:
        names.append(name)
        replicas.append(factor)
        uncompressed.append(True)
    sync.register(list(zip(names, replicas)), overlap=False,
                  uncompressed=uncompressed)
    # Replicas of exchanged gradients: each one's value before the exchange
    # turns the pulled weights into the mean gradient: the sync leaves it in
    # the replica's .grad once the pushes are done, or, where it cannot
    # (local ranks), a copy of the replicas is kept. Means need no value
    # from before; exchanging updates, the replicas are the model.
    before = None
    if not exchange_updates and not means:
        try:
            sync._set_keep_weights_in_gradients(True)
        except Error:
            before = [torch.empty_like(r) for r in replicas]
    return Aggregation(sync, replicas, before,
                       options.get("worker_id", 0),
                       options.get("num_workers", 1), skip, means)



@torch.no_grad()
def copy_replicas_out(parameters, model_buffers, replicas, with_parameters):
    """Copies the replicas (the parameters', then the buffers') into the
    model's buffers (name, tensor pairs) and, `with_parameters`, into the
    `parameters` that are not registered themselves."""
    count = len(parameters)
    if with_parameters:
        for p, r in zip(parameters, replicas[:count]):
            if not is_registered_itself(p, r):
                p.copy_(r)
    for (_, b), r in zip(model_buffers, replicas[count:]):
        b.copy_(r)
