"""What DistributedOptimizer exchanges: the gradients or each worker's
update (its exchange="auto" rule)."""

import torch

# Optimizers that scale each coordinate by its own gradient history: given a
# sparse, bursty gradient (a coordinate's error-feedback backlog arriving
# at once) they shrink its step, so exchange="auto" exchanges their
# updates instead (docs/convergence.md).
_ADAPTIVE = (torch.optim.Adam, torch.optim.AdamW, torch.optim.Adadelta,
             torch.optim.Adagrad, torch.optim.Adamax, torch.optim.RMSprop,
             torch.optim.NAdam, torch.optim.RAdam)


def resolve_exchange(exchange, optimizer, compression):
    if exchange == "auto":
        # Lossless pushes bring the exact mean gradient, as DDP's: then
        # every optimizer steps on it as under DDP.
        if compression.compressor == "none":
            return "gradients"
        return "updates" if isinstance(optimizer, _ADAPTIVE) else "gradients"
    if exchange not in ("gradients", "updates"):
        raise ValueError(f"exchange: '{exchange}' is not auto, gradients or "
                         "updates")
    return exchange
