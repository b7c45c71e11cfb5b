"""gradwire for torch.optim users: DistributedOptimizer.

The Horovod/BytePS habit: wrap the optimizer you already have. The shards
aggregate the workers' compressed gradients; the wrapped optimizer steps on
the average locally, so any ``torch.optim`` optimizer, LR scheduler and
gradient clipping keep working::

    opt = gradwire.torch.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        named_parameters=model.named_parameters(),
        shards=["10.0.0.1:7000"], worker_id=rank, num_workers=world,
        compression={"compressor": "topk", "ratio": 0.01})
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

How: the shards hold, per parameter, an aggregation buffer that starts at
the first worker's initial weights and runs plain SGD at learning rate 1,
so each step moves it by minus the workers' mean (compressed) gradient.
Every worker holds an identical replica of the buffer; the change of the
replica over a step is the aggregated gradient, written into ``p.grad``
before the wrapped optimizer steps. The same start (every worker copies the
buffer's initial value into its parameters) and the same gradients keep the
workers' models identical.
"""

import torch

from gradwire import _C
from gradwire._sync import ParameterSync

__all__ = ["DistributedOptimizer"]

# Options of gradwire.ParameterSync that `compression` may set.
_COMPRESSION_KEYS = (
    "compressor", "ratio", "min_kept", "threshold", "levels", "qsgd_bucket",
    "onebit_bucket", "value_type",
    "error_feedback", "dgc_momentum", "dgc_momentum_masking",
    "dgc_clip_norm", "dgc_warmup_epochs")
# Options the wrapper decides itself: the shards only aggregate.
_RESERVED_KEYS = ("optimizer", "lr", "momentum", "weight_decay",
                  "momentum_placement", "fold_scale", "adam_freeze_step")


class DistributedOptimizer(torch.optim.Optimizer):
    """Wraps a torch optimizer; its gradients are exchanged through gradwire.

    Args:
      optimizer: the torch.optim optimizer to step with the aggregated
        gradient. Its param_groups and state are shared, so LR schedulers
        and state_dict() work on either object.
      named_parameters: ``model.named_parameters()`` (names must agree on
        every worker). Default: the optimizer's parameters, named by
        position.
      compression: dict of compression options: compressor ("topk"),
        ratio (0.01), value_type ("fp16"), error_feedback (True),
        threshold, levels, dgc_* (see help(gradwire.ParameterSync)).
      overlap: push each gradient as soon as backward() has finished it.
        Gradients must then not change before step(); to clip or scale the
        aggregated gradient, call ``synchronize()``, change ``p.grad``,
        then ``step()``.
      backward_passes_per_step: backward() calls per step (gradient
        accumulation).
      **sync_options: every other gradwire.ParameterSync option: shards,
        worker_id, num_workers, mode, pull, pull_ratio, deadlines, TLS...
        (optimizer, lr, momentum and weight_decay belong to ``optimizer``).

    Raises ValueError naming a bad option; gradwire.Error when a shard
    cannot be reached or refuses.
    """

    def __init__(self, optimizer, named_parameters=None, *, compression=None,
                 overlap=True, backward_passes_per_step=1, **sync_options):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError("optimizer: expected a torch.optim.Optimizer, "
                             f"got {type(optimizer).__name__}")
        for key in _RESERVED_KEYS:
            if key in sync_options:
                raise ValueError(
                    f"{key}: set it on the wrapped optimizer; the shards "
                    "only aggregate gradients")
        compression = dict(compression or {})
        for key in compression:
            if key not in _COMPRESSION_KEYS:
                raise ValueError(
                    f"compression: unknown option '{key}' (known: "
                    f"{', '.join(_COMPRESSION_KEYS)})")
        # Deliberately not Optimizer.__init__: the wrapped optimizer owns
        # param_groups, state and defaults; this object shares them.
        self._optimizer = optimizer
        self.param_groups = optimizer.param_groups
        self.state = optimizer.state
        self.defaults = optimizer.defaults
        named = self._named(named_parameters)
        self._parameters = [p for _, p in named]
        # The aggregation buffers: replicas of the shards' weights.
        self._buffers = [p.detach().clone().contiguous() for p in
                         self._parameters]
        self._before = [torch.empty_like(b) for b in self._buffers]
        self._sync = ParameterSync(optimizer="sgd", lr=1.0, momentum=0.0,
                                   weight_decay=0.0, **compression,
                                   **sync_options)
        names = [name for name, _ in named]
        self._sync.register(list(zip(names, self._buffers)), overlap=False)
        self._hooks = None
        if overlap:
            from gradwire._sync import _GradientHooks
            self._hooks = _GradientHooks(self._parameters, names,
                                         self._gradient_ready,
                                         backward_passes_per_step)
        self._synchronized = False
        self._epoch = 0
        with torch.no_grad():
            for p, b in zip(self._parameters, self._buffers):
                p.copy_(b)

    def _named(self, named_parameters):
        if named_parameters is None:
            params = [p for group in self._optimizer.param_groups
                      for p in group["params"]]
            return [(f"param.{i}", p) for i, p in enumerate(params)]
        named = list(named_parameters.items()) \
            if hasattr(named_parameters, "items") else list(named_parameters)
        in_optimizer = {id(p) for group in self._optimizer.param_groups
                        for p in group["params"]}
        for name, p in named:
            if id(p) not in in_optimizer:
                raise ValueError(
                    f"named_parameters: {name} is not in the optimizer's "
                    "param_groups")
        return named

    def _gradient_ready(self, index):
        # The buffer carries the parameter's gradient to the C++ side.
        self._buffers[index].grad = self._parameters[index].grad
        self._sync._gradient_ready(index, self._epoch)

    @property
    def stats(self):
        """gradwire.SyncStats: bytes pushed and pulled, dense-equivalent."""
        return self._sync.stats

    @property
    def next_step(self):
        """The next step number: steps exchanged so far, including those a
        restarted worker resumes after (the shards remember them)."""
        return self._sync.next_step

    def set_epoch(self, epoch):
        """The epoch compressor warm-up schedules see (DGC)."""
        self._epoch = int(epoch)
        self._sync.set_epoch(epoch)

    @torch.no_grad()
    def synchronize(self):
        """Exchanges this step's gradients: on return every ``p.grad`` holds
        the workers' mean gradient (as compressed), the same on every
        worker. step() calls it unless it was called since the last
        step()."""
        if self._synchronized:
            return
        for p, b, before in zip(self._parameters, self._buffers,
                                self._before):
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            b.grad = p.grad
            before.copy_(b)
        if self._hooks is not None:
            try:
                self._hooks.check_unchanged()
            finally:
                self._hooks.reset()
        self._sync.step(self._epoch)
        for p, b, before in zip(self._parameters, self._buffers,
                                self._before):
            torch.sub(before, b, out=p.grad)
            b.grad = None
        self._synchronized = True

    def step(self, closure=None):
        """Synchronizes (unless done already) and steps the wrapped
        optimizer on the aggregated gradients. A closure would recompute
        local gradients after the exchange and is refused."""
        if closure is not None:
            raise ValueError(
                "closure: not supported; gradients are exchanged before the "
                "wrapped optimizer steps")
        self.synchronize()
        self._synchronized = False
        return self._optimizer.step()

    def zero_grad(self, set_to_none=False):
        self._optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self._optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self._optimizer.load_state_dict(state_dict)
        self.state = self._optimizer.state
        self.param_groups = self._optimizer.param_groups

    def add_param_group(self, param_group):
        raise ValueError("add_param_group: the parameters are fixed when the "
                         "shards are initialised; create a new optimizer")

    def close(self):
        if self._hooks is not None:
            self._hooks.remove()
            self._hooks = None
        self._sync.close()

    def __repr__(self):
        return f"DistributedOptimizer({self._optimizer!r})"
