"""What DistributedOptimizer exchanges: the gradients or each worker's
update (its exchange="auto" rule)."""

import os

import torch

# Names the exchange where the script leaves exchange="auto", so that a
# launcher or a benchmark can choose it as GRADWIRE_COMPRESSION chooses the
# compression.
ENVIRONMENT_VARIABLE = "GRADWIRE_EXCHANGE"

# Optimizers that scale each coordinate by its own gradient history: given a
# sparse, bursty gradient (a coordinate's error-feedback backlog arriving
# at once) they shrink its step, so exchange="auto" exchanges their
# updates instead (docs/convergence.md).
_ADAPTIVE = (torch.optim.Adam, torch.optim.AdamW, torch.optim.Adadelta,
             torch.optim.Adagrad, torch.optim.Adamax, torch.optim.RMSprop,
             torch.optim.NAdam, torch.optim.RAdam)


def resolve_exchange(exchange, optimizer, compression):
    """"gradients" or "updates" for DistributedOptimizer's `exchange`
    keyword; "auto" takes GRADWIRE_EXCHANGE where set. Raises ValueError
    naming a bad value."""
    if exchange == "auto":
        chosen = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
        if chosen:
            if chosen not in ("auto", "gradients", "updates"):
                raise ValueError(
                    f"{ENVIRONMENT_VARIABLE}: '{chosen}' is not auto, "
                    "gradients or updates")
            exchange = chosen
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
