"""What DistributedOptimizer exchanges: the gradients, the gradients
preconditioned by a frozen Adam second moment, or each worker's update
(its exchange="auto" rule)."""

import os

import torch

_CHOICES = ("auto", "gradients", "preconditioned", "updates")

# Names the exchange where the script leaves exchange="auto", so that a
# launcher or a benchmark can choose it as GRADWIRE_COMPRESSION chooses the
# compression.
ENVIRONMENT_VARIABLE = "GRADWIRE_EXCHANGE"
# Names exchange="preconditioned"'s freeze step where the script leaves it.
FREEZE_STEP_VARIABLE = "GRADWIRE_FREEZE_STEP"
# The dense steps before Adam's second moment freezes, by default: 1-bit
# Adam's warm-up on the MLP (docs/convergence.md).
DEFAULT_FREEZE_STEP = 50

# Optimizers that scale each coordinate by its own gradient history: given a
# sparse, bursty gradient (a coordinate's error-feedback backlog arriving
# at once) they shrink its step, so exchange="auto" exchanges their
# updates instead (docs/convergence.md).
_ADAPTIVE = (torch.optim.Adam, torch.optim.AdamW, torch.optim.Adadelta,
             torch.optim.Adagrad, torch.optim.Adamax, torch.optim.RMSprop,
             torch.optim.NAdam, torch.optim.RAdam)


def resolve_exchange(exchange, optimizer, compression):
    """"gradients", "preconditioned" or "updates" for DistributedOptimizer's
    `exchange` keyword; "auto" takes GRADWIRE_EXCHANGE where set. Raises
    ValueError naming a bad value."""
    if exchange == "auto":
        chosen = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
        if chosen:
            if chosen not in _CHOICES:
                raise ValueError(
                    f"{ENVIRONMENT_VARIABLE}: '{chosen}' is not "
                    + ", ".join(_CHOICES))
            exchange = chosen
    if exchange == "auto":
        # Lossless pushes bring the exact mean gradient, as DDP's, and
        # powersgd a dense low-rank one, as DDP's hook does: then every
        # optimizer steps on it as under DDP.
        if compression.compressor == "none" or compression.is_low_rank:
            return "gradients"
        return "updates" if isinstance(optimizer, _ADAPTIVE) else "gradients"
    if exchange not in _CHOICES:
        raise ValueError(f"exchange: '{exchange}' is not "
                         + ", ".join(_CHOICES))
    return exchange


def resolve_freeze_step(freeze_step):
    """DistributedOptimizer's `freeze_step`: None takes GRADWIRE_FREEZE_STEP
    where set, else DEFAULT_FREEZE_STEP. Raises ValueError naming a
    variable that is not a whole number (FrozenVariance checks the
    range)."""
    if freeze_step is not None:
        return freeze_step
    chosen = os.environ.get(FREEZE_STEP_VARIABLE, "").strip()
    if not chosen:
        return DEFAULT_FREEZE_STEP
    try:
        return int(chosen)
    except ValueError:
        raise ValueError(f"{FREEZE_STEP_VARIABLE}: '{chosen}' is not a "
                         "whole number") from None


def resolve_overlap(overlap, exchange_updates, low_rank, local_size):
    """DistributedOptimizer's `overlap` (None: its default): on where each
    gradient can be pushed as backward() finishes it, that is when
    gradients are exchanged, not powersgd's whole matrices, and the
    process pushes alone (a node's local group reduces whole steps).
    Raises ValueError for overlap=True where it cannot be, before
    anything connects."""
    if overlap is None:
        return not exchange_updates and low_rank is None and local_size == 1
    if overlap and (exchange_updates or low_rank is not None):
        raise ValueError("overlap: the update exists only after the "
                         "wrapped optimizer stepped, and powersgd "
                         "compresses whole matrices at step time; both "
                         "need overlap=False")
    if overlap and local_size > 1:
        raise ValueError(
            f"overlap: this process is one of a node's {local_size} local "
            "ranks (LOCAL_WORLD_SIZE), which reduce whole steps before "
            "pushing; use overlap=False (the default there)")
    return overlap
