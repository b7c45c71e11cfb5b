"""Error feedback in units of the update, for DistributedOptimizer when it
exchanges gradients under lossy compression with error feedback.

Each gradient is pushed times its group's learning rate over the rate it
had when the optimizer was wrapped, and the workers' mean is divided by
the same factor: what error feedback holds back is then an update,
released at the rate of the step it came from, not at a later step's
(higher during a warm-up, lower as a schedule decays).
"""

import torch


class LearningRateScaling:
    """Hooks on the parameters of ``param_groups`` that scale each gradient
    as backward() makes it (before overlap pushes it), and unscale() for
    the mean that comes back. The rates are read at every call, so LR
    schedulers work. Not thread-safe: the training thread's."""

    def __init__(self, param_groups):
        self._groups = param_groups
        self._base = [group["lr"] for group in param_groups]
        self._group_of = {id(p): index
                          for index, group in enumerate(param_groups)
                          for p in group["params"]}
        self._handles = [
            p.register_hook(lambda g, index=index: g * self.scale(index))
            for index, group in enumerate(param_groups)
            for p in group["params"] if p.requires_grad]

    def scale(self, group_index):
        """The factor of group ``group_index``'s gradients this step."""
        base = self._base[group_index]
        lr = self._groups[group_index]["lr"]
        # A rate of 0 steps nothing: its gradient goes unscaled.
        return lr / base if base > 0 and lr > 0 else 1.0

    @torch.no_grad()
    def unscale(self, parameters):
        """Divides each parameter's .grad (the workers' mean of scaled
        gradients) by its group's factor."""
        for p in parameters:
            factor = self.scale(self._group_of[id(p)])
            if factor != 1.0:
                p.grad.div_(factor)

    def remove(self):
        for handle in self._handles:
            handle.remove()
        self._handles = []
