"""DistributedOptimizer's exchanges, one step's worth: the gradients (with
powersgd's factors beside them, gradwire/_lowrank.py) or the wrapped
optimizer's update, and the buffers, through the shards' aggregation
buffers (gradwire/_aggregation.py). A half of the class, kept apart from
its public face in torch.py; it reads the attributes that
DistributedOptimizer.__init__ sets."""

import time

import torch

from gradwire._buffers import check_constants, stage_buffers
from gradwire._aggregation import means_of, stage_gradient
from gradwire._C import Error
from gradwire._nonfinite import all_finite
from gradwire._updates import step_on_updates


class ExchangeSteps:
    """The exchange methods of DistributedOptimizer (its base)."""

    #: Exchanges made within a step after its first (powersgd's second)
    #: and their dense-equivalent bytes: the per-step figures
    #: (gradwire/_metrics.py) count steps and one dense model a step, as
    #: DDP's all-reduce does.
    inner_exchanges = 0
    inner_dense_bytes = 0

    def _residual_norm(self):
        # The sync's error feedback, and powersgd's kept here.
        norm = self._sync.residual_norm()
        if self._lowrank is not None:
            norm = (norm ** 2 + self._lowrank.residual_norm() ** 2) ** 0.5
        return norm

    def _check_resumable(self):
        if self._awaiting_state:
            raise Error(
                f"FAILED_PRECONDITION: the shards resume this job at step "
                f"{self.next_step}: load this worker's checkpoint (the "
                "model's state dict and DistributedOptimizer.load_state_dict,"
                " or gradwire.torch.load_checkpoint) before the first step")

    @torch.no_grad()
    def _exchange(self):
        """One exchange of what the replicas' .grad hold (set by the
        caller) and the buffers; on return the replicas hold the shards'
        new values and, exchanging gradients, ``self._before`` their values
        before it."""
        start = time.monotonic()
        check_constants(self._constant_buffers)
        count = len(self._parameters)
        stage_buffers(self._model_buffers, self._replicas[count:],
                      self._worker_id, self._num_workers, self._means)
        if self._before is not None:
            for r, before in zip(self._replicas, self._before):
                before.copy_(r)
        self._sync.step(self._epoch)
        for r in self._replicas:
            r.grad = None
        self._copy_replicas_out(with_parameters=False)
        self._exchange_seconds += time.monotonic() - start

    @torch.no_grad()
    def _exchange_gradients(self, gradients):
        """Exchanges `gradients` (one tensor per parameter, in order, each
        of its parameter's shape) and writes the workers' mean into them.
        Returns whether a worker's were not finite: the step is then
        skipped on every worker, and `gradients` hold NaN."""
        self._check_resumable()
        step, finite = self.next_step, all_finite(gradients)
        factors = [] if self._lowrank is None else \
            self._lowrank.compress(gradients, finite, step)
        pushed = list(gradients) + factors
        places = list(range(len(gradients))) + list(
            range(self._flag_index + 1, len(self._replicas)))
        for g, i in zip(pushed, places):
            stage_gradient(self._replicas[i], g)
        self._skip.stage(finite)
        if self._hooks is not None:
            self._hooks.finish_step()
        self._exchange()
        self._read_means(pushed, places)
        flag_before = None if self._before is None else \
            self._before[self._flag_index]
        if not self._skip.skipped(flag_before):
            if self._lowrank is not None:
                self._expand_low_rank(gradients, factors, step)
            return False
        for g in gradients:
            g.fill_(float("nan"))
        return True

    def _expand_low_rank(self, gradients, means, step):
        """powersgd's side of a step that every worker stepped: its mean
        gradients into `gradients`, after as many more exchanges of its
        factors as it asks for (PowerSGD's Q after P)."""
        push = self._lowrank.expand(gradients, means, step)
        while push is not None:
            self._exchange_factors(push)
            push = self._lowrank.expand(gradients, push, step)

    @torch.no_grad()
    def _exchange_factors(self, factors):
        """One more exchange within a step, of the registered `factors`
        alone: every other tensor (parameters, buffers, the skip flag)
        pushes nothing, is not reduced inside the node and keeps its
        values. Writes the workers' mean into `factors`."""
        start = time.monotonic()
        places = list(range(self._flag_index + 1, len(self._replicas)))
        for f, i in zip(factors, places):
            stage_gradient(self._replicas[i], f)
            if self._before is not None:
                self._before[i].copy_(self._replicas[i])
        dense_before = self._sync.stats.dense_equivalent_bytes
        self._sync._step_carrying(self._epoch, places)
        self.inner_exchanges += 1
        self.inner_dense_bytes += (self._sync.stats.dense_equivalent_bytes
                                   - dense_before)
        for i in places:
            self._replicas[i].grad = None
        self._read_means(factors, places)
        self._exchange_seconds += time.monotonic() - start

    def _read_means(self, pushed, places):
        """After an exchange: the workers' mean of what `pushed` held, into
        each of them (the registered tensors at `places` were exchanged).
        The shards hand means on, or moved replicas by minus them."""
        if self._means:
            means_of(self._replicas, pushed, places)
            return
        for g, i in zip(pushed, places):
            before = g if self._before is None else self._before[i]
            torch.sub(before, self._replicas[i], out=g)

    def _step_on_updates(self):
        self._check_resumable()
        finite = all_finite(p.grad for p in self._parameters)
        self._skip.stage(finite)
        return step_on_updates(self._optimizer, self._parameters,
                               self._replicas, self._exchange, finite)

