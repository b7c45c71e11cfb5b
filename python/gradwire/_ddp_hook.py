"""gradwire as a DDP communication hook: DDPHookState and ddp_comm_hook.

A DistributedDataParallel model hands each bucket of gradients to the hook
instead of all-reducing it over its process group; the hook exchanges
them through gradwire's shards, compressed with error feedback, and DDP
writes the workers' mean back into ``p.grad``. The user's optimizer,
schedulers, clipping and AMP stay as they are; DDP's process group still
starts the job (it broadcasts rank 0's parameters and buffers).

How: the state keeps a DistributedOptimizer over the model's parameters
(exchanging gradients, the shards' aggregation buffers, see torch.py)
whose wrapped optimizer never steps. Buckets wait until DDP hands over the
last one of the step; then every parameter's gradient (a view into its
bucket) is exchanged at once and each bucket's future completes with its
buffer holding the mean. The parameters are registered with the shards at
the first step, in the order of that step's buckets, which DDP makes the
same on every rank.
"""

import os

import torch

from gradwire import compression as compression_settings
from gradwire._C import Error
from gradwire._mixed_precision import exchange_in_fp32
from gradwire._renamed import renamed_keywords

# The key of the hook's part of a state dict.
_STATE_KEY = "gradwire_ddp_hook"


def default_compression():
    """The hook's compression where the script names none and
    GRADWIRE_COMPRESSION is unset: each weight matrix as PowerSGD's rank-4
    factors, P then Q a step, with error feedback; tensors under 16384
    elements whole. The hook exchanges gradients whatever the optimizer,
    and of gradients a low-rank factor keeps what Adam and AdamW need where
    Top-K 1% does not: on the GPT of examples/python (AdamW, 200 steps)
    the hook's held-out perplexity was 24.8 with Top-K 1% against DDP's
    9.4 (docs/convergence.md, "The DDP hook")."""
    if os.environ.get(compression_settings.ENVIRONMENT_VARIABLE, "").strip():
        return compression_settings.Compression.from_environment()
    return compression_settings.Compression(compression_settings.LOW_RANK)


class DDPHookState:
    """What ``ddp_comm_hook`` needs between calls; pass it to
    ``DistributedDataParallel.register_comm_hook`` with the hook.

    Args:
      compression: a gradwire.Compression or a dict of its keywords, as
        DistributedOptimizer takes it (default: GRADWIRE_COMPRESSION where
        set, else Compression("powersgd"): rank-4 factors of each weight
        matrix, two exchanges a step, error feedback, parameters under
        16384 elements whole; see default_compression).
      **sync_options: DistributedOptimizer's other options (shards,
        node_rank, num_nodes, restore_residuals, ...); without ``shards``
        they come from the environment (gradwire.init(), ``gradwire run``).
        worker_id and num_workers, their old names, warn.

    Mixed precision: under torch.autocast and with bf16 parameters the
    buckets are exchanged as DistributedOptimizer exchanges gradients
    (bf16 ones through float32 copies). With a GradScaler, a step whose
    gradients overflowed on any rank comes back NaN on every rank, so
    every scaler skips it; ``restore_residuals=True`` (the hook does not
    see the scaler) also leaves the residuals as they were before it from
    the first step on.

    Error feedback keeps what compression leaves out in units of the
    gradient (DistributedOptimizer's learning-rate scaling needs the
    optimizer, which the hook does not see).
    """

    def __init__(self, compression=None, **sync_options):
        for key in ("exchange", "overlap", "broadcast_buffers",
                    "backward_passes_per_step"):
            if key in sync_options:
                raise ValueError(
                    f"{key}: not an option of the DDP hook (it exchanges "
                    "DDP's buckets of gradients; DDP broadcasts the buffers)")
        self._compression = compression
        # Renamed here, where the script passed them: the optimizer is
        # made at the first step.
        self._sync_options = renamed_keywords(sync_options, "DDPHookState",
                                              2)
        self._exchange = None
        self._index = {}
        self._pending = []
        self._loaded = None

    @property
    def exchange(self):
        """The DistributedOptimizer that exchanges the gradients (None
        before the first step): its ``stats``, ``exchange_seconds`` and
        ``next_step``."""
        return self._exchange

    @property
    def stats(self):
        """gradwire.SyncStats of the exchanges so far (None before the
        first step)."""
        return None if self._exchange is None else self._exchange.stats

    def metrics(self):
        """DistributedOptimizer.metrics() of the exchange ({} before the
        first step)."""
        return {} if self._exchange is None else self._exchange.metrics()

    def _start(self, parameters):
        # Local import: torch.py imports this module.
        from gradwire.torch import DistributedOptimizer

        class Exchange(DistributedOptimizer):
            # DDP owns the parameters' gradients: they stay as DDP has them.
            _lends_gradients = False

        holder = torch.optim.SGD(parameters, lr=0.0)
        self._exchange = Exchange(
            holder, [(f"ddp.{i}", p) for i, p in enumerate(parameters)],
            compression=(default_compression() if self._compression is None
                         else self._compression), exchange="gradients",
            overlap=False, broadcast_buffers=False, **self._sync_options)
        self._index = {id(p): i for i, p in enumerate(parameters)}
        if self._loaded is not None:
            self._exchange.load_state_dict(self._loaded)
            self._loaded = None

    def _run(self, buckets):
        if self._exchange is None:
            self._start([p for bucket, _ in buckets
                         for p in bucket.parameters()])
        gradients = [None] * len(self._index)
        for bucket, _ in buckets:
            for p, g in zip(bucket.parameters(), bucket.gradients()):
                index = self._index.get(id(p))
                if index is None:
                    raise Error(
                        "FAILED_PRECONDITION: the DDP hook got a parameter "
                        "it did not register at the first step; register "
                        "the hook on a model whose parameters stay the same")
                gradients[index] = g
        for i, p in enumerate(self._exchange._parameters):
            if gradients[i] is None:
                gradients[i] = torch.zeros_like(p)
        exchange_in_fp32(self._exchange, gradients)

    def state_dict(self):
        """This worker's compression state (error-feedback residuals) and
        the step it belongs to; each worker saves its own."""
        if self._exchange is None:
            return {_STATE_KEY: self._loaded}
        return {_STATE_KEY: self._exchange.state_dict()}

    def load_state_dict(self, state_dict):
        """Restores what state_dict() returned, before the first step of a
        resumed job (the shards restored from their checkpoint)."""
        if _STATE_KEY not in state_dict:
            raise ValueError(f"state_dict: no '{_STATE_KEY}' entry; pass "
                             "what DDPHookState.state_dict() returned")
        state = state_dict[_STATE_KEY]
        if self._exchange is None:
            self._loaded = state
        elif state is not None:
            self._exchange.load_state_dict(state)

    def close(self):
        if self._exchange is not None:
            self._exchange.close()


def ddp_comm_hook(state, bucket):
    """DistributedDataParallel's communication hook: each bucket's mean
    over the workers, through gradwire's shards. Use as
    ``ddp_model.register_comm_hook(gradwire.torch.DDPHookState(),
    gradwire.torch.ddp_comm_hook)``."""
    if not isinstance(state, DDPHookState):
        raise ValueError("ddp_comm_hook: the state must be a "
                         f"gradwire.torch.DDPHookState, got "
                         f"{type(state).__name__}")
    future = torch.futures.Future()
    state._pending.append((bucket, future))
    if bucket.is_last():
        pending, state._pending = state._pending, []
        try:
            state._run(pending)
        except BaseException as error:
            for _, waiting in pending:
                waiting.set_exception(error)
            return future
        for done, waiting in pending:
            waiting.set_result(done.buffer())
    return future
