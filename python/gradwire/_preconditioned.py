"""Exchanging preconditioned gradients: DistributedOptimizer's
exchange="preconditioned", for torch.optim.Adam and AdamW under lossy
compression, after 1-bit Adam (Tang et al., ICML 2021), on the wrapped
optimizer's own state.

Adam divides each coordinate's first moment by the root of its second
moment v, and v is not linear in the gradient: fed the mean of compressed
gradients with error feedback (a coordinate's held-back sum arriving at
once), it grows where compression held back most and shrinks those steps.
So:

- For the first ``freeze_step`` steps the gradients go out uncompressed
  (ParameterSync's ``dense_steps``) and the wrapped optimizer steps on
  their exact mean, as under DDP: v is estimated from true mean gradients.
- From then on v and its bias correction stay as they were. Each worker's
  gradient divided by the frozen denominator sqrt(v / bc2) + eps (the
  step this coordinate takes per unit of first moment) is compressed with
  error feedback, so Top-K keeps the largest steps rather than the largest
  raw gradients; the rule being linear, the workers' mean of preconditioned
  gradients is the preconditioned mean gradient. ``p.grad`` gets that mean
  times the denominator back (the mean gradient, for clipping), and the
  first moment and the parameter step by Adam's rule with the frozen
  denominator, the same on every worker.

With ``compressor="dgc"`` and its ``dgc_momentum`` (DGC's momentum
correction), the first moment runs on each worker before compression
instead: the compressor keeps a velocity u = m·u + g/denominator per
worker, sends its largest elements with error feedback and clears them
(momentum masking), and the step applies (1 - m) times the workers' mean
of what was sent, as 1-bit Adam applies its compressed momentum. A
coordinate held back then keeps its momentum from growing twice, once in
the residual and once in the optimizer's first moment. ``exp_avg`` holds
the first moment applied at the last step.

The optimizer's state keeps torch's layout (``exp_avg``, ``exp_avg_sq``,
``step``) plus ``frozen_step``, the step v froze at, so a checkpoint
resumes the frozen rule and a plain torch optimizer can load it.
"""

import math

import torch

# The optimizers whose rule this module reproduces, and whether their
# weight decay is decoupled (AdamW) or added to the gradient (Adam).
_DECOUPLED = {torch.optim.Adam: False, torch.optim.AdamW: True}


def velocity_of(compression):
    """The momentum of a gradwire.Compression's own velocity (DGC's
    momentum correction, dgc_momentum), 0 without one."""
    if compression.compressor != "dgc":
        return 0.0
    return float(compression.options.get("dgc_momentum", 0.0))


def supports(optimizer):
    """Whether `optimizer` is a torch Adam or AdamW this module can step:
    not amsgrad, not maximize."""
    if type(optimizer) not in _DECOUPLED:
        return False
    return not any(group.get("amsgrad") or group.get("maximize")
                   for group in optimizer.param_groups)


class FrozenVariance:
    """The preconditioner hooks and the frozen step of one wrapped Adam or
    AdamW. ``is_frozen()`` says whether this step's gradients are
    preconditioned (the caller passes the step number in flight). Not
    thread-safe: the training thread's."""

    @staticmethod
    def check(optimizer, freeze_step, velocity=0.0):
        """Raises ValueError unless `optimizer` and `freeze_step` suit (and
        a `velocity` momentum, which needs decoupled weight decay)."""
        if not supports(optimizer):
            raise ValueError(
                "exchange='preconditioned': needs torch.optim.Adam or AdamW "
                "without amsgrad or maximize, got "
                f"{type(optimizer).__name__}")
        if isinstance(freeze_step, bool) or not isinstance(freeze_step, int) \
                or freeze_step < 1:
            raise ValueError(f"freeze_step: {freeze_step!r} must be an int "
                             ">= 1: v is estimated from that many dense "
                             "steps")
        if velocity and not _DECOUPLED[type(optimizer)] and any(
                group["weight_decay"] for group in optimizer.param_groups):
            raise ValueError(
                "compression: dgc_momentum with torch.optim.Adam's weight "
                "decay (added to the gradient) is not supported; use AdamW")

    def __init__(self, optimizer, freeze_step, next_step, velocity=0.0):
        """`next_step` returns the number of the step in flight;
        `velocity` is the compressor's momentum (dgc_momentum), 0 when
        the gradients are compressed as they are."""
        self.check(optimizer, freeze_step, velocity)
        self._velocity = float(velocity)
        self._optimizer = optimizer
        self._decoupled = _DECOUPLED[type(optimizer)]
        self._freeze_step = int(freeze_step)
        self._next_step = next_step
        self._group_of = {id(p): group for group in optimizer.param_groups
                          for p in group["params"]}
        self._handles = [
            p.register_hook(lambda g, p=p: self._precondition(p, g))
            for group in optimizer.param_groups for p in group["params"]
            if p.requires_grad]

    @property
    def freeze_step(self):
        return self._freeze_step

    def is_frozen(self):
        """Whether the step in flight exchanges preconditioned gradients."""
        return self._next_step() >= self._freeze_step

    def _denominator(self, p):
        """sqrt(v / bc2) + eps at the freeze; ones where the parameter had
        no second moment then (it never had a gradient)."""
        state = self._optimizer.state[p]
        if "frozen_step" not in state:
            state["frozen_step"] = int(state.get("step", 0))
        if state["frozen_step"] == 0:
            return torch.ones_like(p)
        v = state["exp_avg_sq"]
        group = self._group_of[id(p)]
        beta2 = group["betas"][1]
        correction = math.sqrt(1 - beta2 ** state["frozen_step"])
        return (v.sqrt() / correction).add_(group["eps"])

    def _precondition(self, p, gradient):
        if not self.is_frozen():
            return gradient
        return gradient / self._denominator(p)

    @torch.no_grad()
    def restore_gradients(self, parameters):
        """Turns each ``p.grad`` (the workers' mean of preconditioned
        gradients) back into the mean gradient."""
        for p in parameters:
            if p.grad is not None:
                p.grad.mul_(self._denominator(p))

    @torch.no_grad()
    def step(self):
        """Adam's or AdamW's step on each ``p.grad`` (the mean gradient),
        with v frozen."""
        for group in self._optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._step_one(p, p.grad, group)

    def _step_one(self, p, gradient, group):
        state = self._optimizer.state[p]
        if "exp_avg" not in state:
            state["frozen_step"] = 0
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        denominator = self._denominator(p)
        lr, weight_decay = group["lr"], group["weight_decay"]
        beta1 = group["betas"][0]
        if weight_decay and self._decoupled:
            p.mul_(1 - lr * weight_decay)
        elif weight_decay:
            gradient = gradient.add(p, alpha=weight_decay)
        state["step"] += 1
        exp_avg = state["exp_avg"]
        if self._velocity:
            # The mean of the sent velocities: the first moment is
            # (1 - m) times it, already with its history.
            torch.mul(gradient, 1 - self._velocity, out=exp_avg)
            p.addcdiv_(exp_avg, denominator, value=-lr)
            return
        exp_avg.mul_(beta1).add_(gradient, alpha=1 - beta1)
        correction = 1 - beta1 ** float(state["step"])
        p.addcdiv_(exp_avg, denominator, value=-lr / correction)

    def remove(self):
        for handle in self._handles:
            handle.remove()
        self._handles = []
