"""gradwire for torch.optim users: DistributedOptimizer.

The Horovod/BytePS habit: wrap the optimizer you already have. The shards
aggregate the workers' compressed gradients; the wrapped optimizer steps on
the average locally, so any ``torch.optim`` optimizer, LR scheduler and
gradient clipping keep working. Under ``gradwire run`` the script needs
two changed lines::

    gradwire.init()
    optimizer = gradwire.torch.DistributedOptimizer(optimizer, model)

How: the shards hold, per parameter, an aggregation buffer that starts at
the first worker's initial weights and runs plain SGD at learning rate 1,
so each step moves it by minus the workers' mean (compressed) gradient.
Every worker holds an identical replica of the buffer; the change of the
replica over a step is the aggregated gradient, written into ``p.grad``
before the wrapped optimizer steps. Pulls of sparse pushes are exact by
default (the mean of W sparse pushes has at most W times their elements),
so the wrapped optimizer sees the mean of what the workers sent, not a
second compression of it. The same start (every worker copies the
buffer's initial value into its parameters) and the same gradients keep
the workers' models identical.

Buffers (BatchNorm's running statistics) are worker 0's on every worker
after each step, as under DDP (gradwire/_buffers.py); lossy gradient
exchanges keep error feedback in units of the update (_lr_scaling.py).
"""

import torch

from gradwire import _C
from gradwire._aggregation import (adopt_gradients, check_sync_options,
                                   connect, copy_replicas_out,
                                   lend_gradients)
from gradwire._buffers import broadcast_buffers_of
from gradwire._env import with_environment
from gradwire._exchange import (resolve_exchange, resolve_freeze_step,
                                resolve_overlap)
from gradwire._exchanging import ExchangeSteps
from gradwire._lowrank import low_rank_of
from gradwire._lr_scaling import LearningRateScaling
from gradwire._metrics import StepFigures, log_metrics, track, untrack
from gradwire._mixed_precision import (SkippedStepResiduals, check_overlap,
                                       check_scaler_order, compression_for,
                                       exchange_in_fp32, unscale_once)
from gradwire._named import named_from
from gradwire._preconditioned import FrozenVariance, velocity_of
from gradwire._renamed import extension_keywords, renamed_keywords
from gradwire._state_dict import split_worker_state, with_worker_state
from gradwire._stats_file import write_at_exit
from gradwire.checkpoint import load_checkpoint, save_checkpoint
from gradwire.compression import Compression

__all__ = ["DistributedOptimizer", "DDPHookState", "ddp_comm_hook",
           "log_metrics", "save_checkpoint", "load_checkpoint"]


class DistributedOptimizer(ExchangeSteps, torch.optim.Optimizer):
    """Wraps a torch optimizer; its gradients are exchanged through gradwire.

    Args:
      optimizer: the torch.optim optimizer to step with the aggregated
        gradient. Its param_groups and state are shared, so LR schedulers
        work on either object.
      named_parameters: the model (an ``nn.Module``: its parameters, and its
        buffers for broadcast_buffers), ``model.named_parameters()`` (names
        must agree on every worker), or None: the optimizer's parameters,
        named by position.
      compression: a gradwire.Compression, or a dict of its keywords, for
        pushes and pulls (default: GRADWIRE_COMPRESSION where set, else
        Top-K 1% with error feedback, exact pulls, parameters under
        16384 elements uncompressed). ``{"compressor": "none"}`` is
        lossless both ways.
      exchange: "gradients": the workers' gradients are compressed and
        exchanged, and the wrapped optimizer steps on their mean, the same
        on every worker. "updates": each worker's wrapped optimizer steps
        on its own gradient, and its update (the change of the parameters)
        is compressed and exchanged; the model takes the mean update. The
        optimizer's state then sees a dense gradient instead of a sparse,
        bursty one, which adaptive optimizers (Adam, Adadelta) need
        (docs/convergence.md), but it is each worker's own.
        "preconditioned" (Adam and AdamW): the first ``freeze_step``
        gradients go out uncompressed and the optimizer steps on their
        exact mean; then Adam's second moment is frozen, each worker's
        gradient divided by its denominator is compressed and exchanged,
        and the optimizer's rule steps on the mean with the frozen
        denominator, the same on every worker (1-bit Adam's rule,
        gradwire/_preconditioned.py). "auto" (default): GRADWIRE_EXCHANGE
        where set, else updates for adaptive optimizers (Adam, AdamW,
        Adadelta, Adagrad, Adamax, RMSprop, NAdam, RAdam) under lossy
        compression, gradients otherwise (Compression("none") then steps
        exactly as DDP does).
      freeze_step: with exchange="preconditioned", the dense steps before
        Adam's second moment freezes (default: GRADWIRE_FREEZE_STEP where
        set, else 50).
      broadcast_buffers: send worker 0's floating-point buffers (BatchNorm's
        running statistics) to every worker at each step, as DDP does; a
        buffer that has not changed costs no bytes. A buffer holding an
        infinity or NaN at the start (a causal mask of -inf) is taken for a
        constant: it is not sent, and step() raises gradwire.Error if it
        changes. Default: on when the model is given.
      overlap: push each gradient as soon as backward() has finished it
        (default when gradients are exchanged and LOCAL_WORLD_SIZE is 1;
        not with updates, nor in a local group, which reduces whole steps).
        Gradients must then not change before step(); to clip or scale the
        aggregated gradient, call ``synchronize()``, change ``p.grad``,
        then ``step()``.
      backward_passes_per_step: backward() calls per step (gradient
        accumulation).
      restore_residuals: whether a step that every worker skips (a
        worker's gradients not finite: GradScaler's overflow) leaves the
        error-feedback residuals as they were before it. None (default):
        from the first step a GradScaler steps, or the first skipped one,
        on; True: from the start; False: never. It keeps a copy of each
        residual (4 bytes per compressed element).
      **sync_options: every other gradwire.ParameterSync option: shards,
        node_rank, num_nodes, mode, deadlines, TLS... Without ``shards``
        they come from the environment (gradwire.init()). worker_id and
        num_workers, the old names of node_rank and num_nodes, warn.

    When the shards resume a job (they recorded steps of this worker),
    the parameters are left as they are, and load_state_dict() with this
    worker's checkpoint must come before the first step.

    Parameters need not be float32: bf16 ones are exchanged through
    float32 copies of their gradients (docs/python.md#mixed-precision).

    Raises ValueError naming a bad option or environment variable;
    gradwire.Error when a shard cannot be reached or refuses.
    """

    # GradScaler.step(optimizer) calls step(grad_scaler=...) on every
    # worker, overflow or not (gradwire/_mixed_precision.py).
    _step_supports_amp_scaling = True

    #: Whether construction lends the registered tensors as ``p.grad``
    #: (lend_gradients); not for the DDP hook, whose DDP owns them.
    _lends_gradients = True

    def __init__(self, optimizer, named_parameters=None, *, compression=None,
                 exchange="auto", broadcast_buffers=None, overlap=None,
                 backward_passes_per_step=1, freeze_step=None,
                 restore_residuals=None, **sync_options):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError("optimizer: expected a torch.optim.Optimizer, "
                             f"got {type(optimizer).__name__}")
        sync_options = renamed_keywords(sync_options,
                                        "DistributedOptimizer", 2)
        check_sync_options(sync_options)
        self._compression = Compression.of(compression)
        self._exchange_kind = resolve_exchange(exchange, optimizer,
                                               self._compression)
        self._exchange_updates = self._exchange_kind == "updates"
        self._freeze_step = None
        if self._exchange_kind == "preconditioned":
            freeze_step = resolve_freeze_step(freeze_step)
            FrozenVariance.check(optimizer, freeze_step,
                                 velocity_of(self._compression))
            self._freeze_step = freeze_step
        named = named_from(optimizer, named_parameters)
        self._compression = compression_for(self._compression, named)
        overlap = check_overlap(overlap, named)
        self._lowrank = low_rank_of(self._compression, named,
                                    self._exchange_kind)
        overlap = resolve_overlap(
            overlap, self._exchange_updates, self._lowrank,
            with_environment(sync_options).get("local_size", 1))
        # Deliberately not Optimizer.__init__: the wrapped optimizer owns
        # param_groups, state and defaults; this object shares them.
        self._optimizer = optimizer
        self.param_groups = optimizer.param_groups
        self.state = optimizer.state
        self.defaults = optimizer.defaults
        model = named_parameters if isinstance(
            named_parameters, torch.nn.Module) else None
        self._parameters = [p for _, p in named]
        self._model_buffers, constants = broadcast_buffers_of(
            model, broadcast_buffers)
        self._constant_buffers = [(n, b, b.clone()) for n, b in constants]
        self._connect(named, sync_options)
        self._residuals = SkippedStepResiduals(self._sync, restore_residuals,
                                               self._lowrank)
        self._hooks = None
        if overlap:
            # The extension's hooks push the model's gradients through the
            # replicas: each replica's .grad becomes its parameter's just
            # before the push.
            self._hooks = _C.GradientHooks(
                self._sync, named, backward_passes_per_step,
                self._replicas[:len(self._parameters)])
        self._lr_scaling = None
        if not self._exchange_updates and self._compression.lossy_feedback:
            self._lr_scaling = LearningRateScaling(self.param_groups)
        self._frozen = None
        self._step_frozen = False
        if self._freeze_step is not None:
            self._frozen = FrozenVariance(optimizer, self._freeze_step,
                                          lambda: self._sync.next_step,
                                          velocity_of(self._compression))
        self._synchronized = self._skipped = False
        self._epoch = 0
        self._exchange_seconds = 0.0
        self._write_stats = write_at_exit(self)
        self._figures = StepFigures()
        track(self)

    def _connect(self, named, sync_options):
        factors = self._lowrank.factors() if self._lowrank else []
        joined = connect(named, self._model_buffers, self._compression,
                         self._exchange_updates, self._freeze_step,
                         extension_keywords(with_environment(sync_options)),
                         factors)
        self._sync, self._replicas, self._before = joined[:3]
        self._worker_id, self._num_workers, self._skip = joined[3:6]
        self._means = joined.means
        # The skip flag sits after the parameters and buffers, the factors
        # after it.
        self._flag_index = len(named) + len(self._model_buffers)
        # A job the shards resume needs this worker's state from its
        # checkpoint (load_state_dict) before the first step. Exchanging
        # gradients, it also keeps the model's weights of that checkpoint:
        # the replicas are aggregation buffers, not the model. Exchanging
        # updates, the replicas are the model.
        self._awaiting_state = self._sync.next_step > 0
        self._copy_replicas_out(with_parameters=not self._awaiting_state
                                or self._exchange_updates)
        if self._means and self._lends_gradients:
            lend_gradients(self._parameters, self._replicas)

    def _copy_replicas_out(self, with_parameters):
        copy_replicas_out(self._parameters, self._model_buffers,
                          self._replicas, with_parameters)

    @property
    def exchange(self):
        """What is exchanged: "gradients", "preconditioned" or "updates"."""
        return self._exchange_kind

    @property
    def freeze_step(self):
        """With exchange="preconditioned", the step at which Adam's second
        moment freezes; None otherwise."""
        return self._freeze_step

    @property
    def compression(self):
        """The gradwire.Compression in use."""
        return self._compression

    @property
    def stats(self):
        """gradwire.SyncStats: bytes pushed and pulled, dense-equivalent."""
        return self._sync.stats

    def metrics(self):
        """Per-step figures since the last call (gradwire/_metrics.py)."""
        return self._figures.read(self)

    @property
    def exchange_seconds(self):
        """Wall time in the exchanges so far; the rest is the script's."""
        return self._exchange_seconds

    @property
    def next_step(self):
        """The next step number: steps exchanged so far, including those a
        restarted worker resumes after (the shards remember them)."""
        return self._sync.next_step

    def set_epoch(self, epoch):
        """The epoch compressor warm-up schedules see (DGC)."""
        self._epoch = int(epoch)
        self._sync.set_epoch(epoch)
        if self._hooks is not None:
            self._hooks.set_epoch(self._epoch)

    @torch.no_grad()
    def synchronize(self):
        """Exchanges this step's gradients: on return every ``p.grad`` holds
        the workers' mean gradient (as compressed), the same on every
        worker, and the model's buffers are worker 0's. step() calls it
        unless it was called since the last step(). Call it before
        clipping, as DDP scripts clip after backward() has averaged. With
        exchange="updates" there is nothing to exchange before step(),
        which exchanges the optimizer's update: it returns at once, and a
        clip then clips this worker's own gradient."""
        if self._synchronized or self._exchange_updates:
            return
        for p in self._parameters:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self._step_frozen = (self._frozen is not None
                             and self._frozen.is_frozen())
        self._skipped = exchange_in_fp32(
            self, [p.grad for p in self._parameters])
        if self._lr_scaling is not None and not self._skipped:
            self._lr_scaling.unscale(self._parameters)
        if self._step_frozen and not self._skipped:
            self._frozen.restore_gradients(self._parameters)
        if self._means:
            adopt_gradients(self._parameters, self._replicas)
        self._synchronized = True

    def step(self, closure=None, grad_scaler=None):
        """Synchronizes (unless done already) and steps the wrapped
        optimizer on the aggregated gradients. A closure (as PyTorch
        Lightning always passes) is called first, under grad mode, to
        compute this step's loss and gradients, and its loss returned; the
        exchange then follows as after a plain backward(). Optimizers that
        call their closure several times a step (LBFGS) would exchange once
        per call and are not supported. ``grad_scaler`` is what
        ``GradScaler.step(optimizer)`` passes: the workers' mean is
        unscaled after the exchange, and a step whose gradients overflowed
        on any worker is skipped on every worker. ValueError where
        ``scaler.unscale_`` ran before ``synchronize()``."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if grad_scaler is not None:
            check_scaler_order(grad_scaler, self, self._synchronized
                               or self._exchange_updates)
        if self._exchange_updates:
            if grad_scaler is not None:
                unscale_once(grad_scaler, self)
            result = self._step_on_updates()
        else:
            self.synchronize()
            if grad_scaler is not None:
                unscale_once(grad_scaler, self)
            skipped, self._synchronized, self._skipped = \
                self._skipped, False, False
            if skipped:
                result = None
            elif self._step_frozen:
                result = self._frozen.step()
            else:
                result = self._optimizer.step()
        if grad_scaler is not None:
            self._residuals.scaler_seen()
        return loss if closure is not None else result

    def zero_grad(self, set_to_none=False):
        # Also ends a step synchronized but never stepped (GradScaler's skip).
        self._synchronized = self._skipped = False
        self._optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        """The wrapped optimizer's state dict, plus under "gradwire" this
        node's compression state (error-feedback residuals, velocities),
        its place and the step it belongs to, in ParameterSync's layout
        (gradwire/_state_dict.py). Each process saves its own."""
        return with_worker_state(
            self._optimizer.state_dict(), self._worker_id, self._num_workers,
            self.next_step, self._sync._save_state(),
            self._lowrank.state_dict() if self._lowrank else None)

    def load_state_dict(self, state_dict):
        """Restores what state_dict() returned, on the same worker of the
        same job, with the shards at the same step (restored from their
        checkpoint directory); the layout of the release before loads
        too. Raises ValueError for a state dict without
        gradwire's part or of another job or worker, gradwire.Error when
        the shards are at another step; nothing changes then."""
        ours, rest = split_worker_state(state_dict)
        if self._lowrank is not None:
            self._lowrank.check_state(ours.get("low_rank"))
        self._sync._load_state(ours["worker_state"])
        if self._lowrank is not None:
            self._lowrank.load_state_dict(ours["low_rank"])
        self._optimizer.load_state_dict(rest)
        self.state = self._optimizer.state
        self.param_groups = self._optimizer.param_groups
        self._awaiting_state = False

    def add_param_group(self, param_group):
        raise ValueError("add_param_group: the parameters are fixed when the "
                         "shards are initialised; create a new optimizer")

    def __del__(self):
        if getattr(self, "_write_stats", None) is not None:
            self._write_stats(self)

    def close(self):
        untrack(self)
        if self._write_stats is not None:
            self._write_stats(self)
        for name in ("_hooks", "_lr_scaling", "_frozen"):
            attached = getattr(self, name)
            if attached is not None:
                attached.remove()
                setattr(self, name, None)
        self._sync.close()

    def __repr__(self):
        return f"DistributedOptimizer({self._optimizer!r})"


# After DistributedOptimizer, which the hook's state holds.
from gradwire._ddp_hook import DDPHookState, ddp_comm_hook  # noqa: E402
