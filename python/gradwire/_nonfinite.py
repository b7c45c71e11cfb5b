"""Steps whose gradients are not finite: skipped on every worker, as DDP
with torch's GradScaler skips them, instead of failing the job.

Exchanging gradients, the sync zeroes a non-finite element on the wire and
keeps it out of the error-feedback residual (the non_finite="zero"
setting), and one more registered tensor of one element, FLAG_NAME,
carries each worker's verdict: 1 where its gradients held an infinity or
NaN. Its mean, read back as a gradient's is, is above 0 when any worker's
did. Every worker then fills its gradients with NaN, so that a GradScaler
finds the overflow on every worker and skips its step as under DDP (whose
all-reduce spreads the infinity), and DistributedOptimizer.step() leaves
the wrapped optimizer alone.

Exchanging updates, each worker's optimizer steps on its own gradient, so
a worker whose gradients are not finite does not step it: its update is
zero and the other workers' updates still count. The flag is registered
and pushed there too (never read), so that a model's fingerprint is the
same whatever is exchanged.
"""

import warnings

import torch

FLAG_NAME = "gradwire:nonfinite"


def all_finite(tensors):
    """Whether every element of every tensor (None skipped) is finite."""
    return all(bool(torch.isfinite(t).all()) for t in tensors
               if t is not None)


class SkipFlag:
    """The registered one-element tensor and this worker's side of it."""

    def __init__(self, means=False):
        self.replica = torch.zeros(1)
        self._staged = None
        self.skipped_steps = 0
        # Whether the shards hand the flags' mean on (_aggregation.py),
        # rather than move a replica by minus it.
        self._means = means

    def stage(self, finite):
        """Sets this worker's verdict (whether its gradients are `finite`)
        as the flag's gradient, before the exchange."""
        self._staged = torch.tensor([0.0 if finite else 1.0])
        self.replica.grad = self._staged

    def skipped(self, copy):
        """After the exchange: whether any worker's gradients were not
        finite. `copy` is the flag's value before it, where the sync could
        not leave it in the gradient (else None)."""
        if self._means:
            skip = float(self.replica) > 0
        else:
            before = copy if copy is not None else self._staged
            skip = float(before - self.replica) > 0
        if skip:
            self.skipped_steps += 1
            warnings.warn(
                "gradwire: a worker's gradients held an infinity or NaN; "
                "the step is skipped on every worker (as DDP with a "
                "GradScaler skips it)", RuntimeWarning)
        return skip
