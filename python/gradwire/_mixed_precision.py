"""Mixed precision under DistributedOptimizer and the DDP hook.

``torch.autocast`` needs nothing here: it computes in bf16 or fp16 from
float32 parameters, whose gradients are float32.

Parameters of another floating dtype (a model converted with
``.to(torch.bfloat16)``) keep float32 aggregation buffers with the shards:
each step casts the gradients to float32 copies for the exchange (the
compressor and its error-feedback residual work in float32) and the mean
back into ``p.grad``. Their pushed values default to bf16 (value_type), the
precision they came in; fp16 cannot carry bf16's range, so a setting that
sends a bf16 model's gradients as fp16 is refused before anything connects.
They are exchanged at step time: overlap's hooks push the parameters' own
gradients, which must be float32.

GradScaler: DistributedOptimizer says ``_step_supports_amp_scaling``, so
``scaler.step(optimizer)`` calls its step() with ``grad_scaler=`` on every
worker, overflow or not (torch's own path would skip the call on a worker
that found an infinity, leaving the others waiting in the exchange). The
step exchanges first, then unscales the workers' mean, in which a
worker's overflow is NaN on every worker (_nonfinite.py), so every
scaler finds it, skips the step and lowers its scale alike.

A skipped step leaves the error-feedback residuals as they were before it
(SkippedStepResiduals): what it pushed is neither counted as sent nor kept
for later, on every worker.
"""

import warnings

import torch

from gradwire.compression import Compression

# Compressors whose values are dense fp16: they cannot carry bf16's range.
_FP16_COMPRESSORS = ("fp16",)
# Compressors that take no value_type: none sends fp32, powersgd's factors
# go whole at fp32.
_NO_VALUE_TYPE = ("none", "powersgd")


def low_precision_dtypes(named):
    """The floating dtypes other than float32 among `named` parameters."""
    return sorted({p.dtype for _, p in named
                   if p.dtype != torch.float32}, key=str)


def compression_for(compression, named):
    """The Compression to use for `named` parameters: `compression`, with
    value_type bf16 where the model has bf16 parameters and none was set.
    Raises ValueError, naming the fix, for a setting that sends a bf16
    model's gradients as fp16, and for a non-floating parameter."""
    dtypes = low_precision_dtypes(named)
    for dtype in dtypes:
        if not dtype.is_floating_point:
            raise ValueError(f"named_parameters: a parameter of dtype "
                             f"{dtype} has no gradient to exchange")
    if torch.bfloat16 not in dtypes:
        return compression
    fix = ("bf16 (the same 2 bytes) or fp32 carry them; or keep the model "
           "in float32 under torch.autocast")
    if compression.compressor in _FP16_COMPRESSORS:
        raise ValueError(
            "compression: compressor fp16 cannot carry the gradients of "
            "bfloat16 parameters (fp16 saturates at 65504, bf16 reaches "
            f"3.4e38): use Compression('bf16'); {fix}")
    value_type = compression.options.get("value_type")
    if value_type == "fp16":
        raise ValueError(
            "value_type: fp16 cannot carry the gradients of bfloat16 "
            "parameters (fp16 saturates at 65504, bf16 reaches 3.4e38): "
            f"set value_type='bf16'; {fix}")
    if value_type is not None or compression.compressor in _NO_VALUE_TYPE:
        return compression
    return Compression(compression.compressor,
                       **dict(compression.options, value_type="bf16"))


def check_overlap(overlap, named):
    """Overlap's default for `named` (None: the caller decides; False for
    parameters that are not float32). Raises ValueError for overlap=True
    beside them."""
    dtypes = low_precision_dtypes(named)
    if not dtypes:
        return overlap
    if overlap:
        raise ValueError(
            f"overlap: {dtypes[0]} parameters are exchanged at step time "
            "through float32 copies of their gradients; use overlap=False "
            "(or float32 parameters under torch.autocast)")
    return False


@torch.no_grad()
def exchange_in_fp32(optimizer, gradients):
    """DistributedOptimizer's gradient exchange (_exchanging.py) of
    `gradients` of any floating dtype, through float32 copies of those that
    are not float32, with the mean written back into `gradients`. On a
    skipped step the residuals are put back (SkippedStepResiduals) and
    `gradients` hold NaN. Returns whether the step was skipped."""
    staged = [g if g.dtype == torch.float32 else g.float()
              for g in gradients]
    skipped = optimizer._exchange_gradients(staged)
    if skipped:
        optimizer._residuals.restore()
    for g, s in zip(gradients, staged):
        if s is not g:
            g.copy_(s)
    return skipped


class SkippedStepResiduals:
    """Puts the error-feedback residuals back after a step that every
    worker skips. The sync copies each residual before compressing it once
    keeping is on (4 bytes per compressed element, and a pass over it each
    step); a residual still empty (a job's first step) needs no copy.

    `mode`: True keeps copies from the start; False never restores; None
    (default) keeps them from the first step a GradScaler steps or the
    first skipped step on.
    """

    def __init__(self, sync, mode=None, low_rank=None):
        if mode not in (None, True, False):
            raise ValueError(f"restore_residuals: expected True, False or "
                             f"None, got {mode!r}")
        self._sync = sync
        # powersgd's residuals (gradwire/_lowrank.py), kept beside the
        # sync's.
        self._low_rank = low_rank
        self._mode = mode
        self.keeping = False
        if mode:
            self._keep()

    def _keep(self):
        self._sync._set_keep_residuals(True)
        if self._low_rank is not None:
            self._low_rank.keep_residuals = True
        self.keeping = True

    def scaler_seen(self):
        """A GradScaler stepped: keep copies from the next step on (the
        residual of a job's first step needs none). Between steps."""
        if self._mode is None and not self.keeping:
            self._keep()

    def restore(self):
        """After a skipped step: puts back what the sync kept; warns where
        a chunk had no copy (its residual keeps that step's gradient)."""
        if self._mode is False:
            return
        missing = self._sync._restore_residuals()
        if self._low_rank is not None:
            missing += self._low_rank.restore_residuals()
        if missing and self._mode is None and not self.keeping:
            self._keep()
        if missing:
            warnings.warn(
                f"gradwire: the residuals of {missing} chunks had no copy "
                "from before the skipped step and keep its gradient; "
                "restore_residuals=True keeps copies from the first step",
                RuntimeWarning)


def _stage_name(grad_scaler, optimizer):
    # GradScaler's per-optimizer stage (READY, UNSCALED, STEPPED): what the
    # contract of _step_supports_amp_scaling lets an optimizer query.
    states = getattr(grad_scaler, "_per_optimizer_states", None)
    if states is None:
        return None
    stage = states[id(optimizer)].get("stage")
    return getattr(stage, "name", None)


def check_scaler_order(grad_scaler, optimizer, synchronized):
    """Raises ValueError where `grad_scaler` unscaled `optimizer`'s
    gradients before they were exchanged (`synchronized` False): it
    looked for an overflow in this worker's own gradients, not in the
    mean, and the workers could disagree about skipping the step."""
    if _stage_name(grad_scaler, optimizer) == "UNSCALED" and \
            not synchronized:
        raise ValueError(
            "grad_scaler: scaler.unscale_(optimizer) ran before the "
            "gradients were exchanged; call optimizer.synchronize() after "
            "scaler.scale(loss).backward() and before scaler.unscale_")


def unscale_once(grad_scaler, optimizer):
    """GradScaler.unscale_(optimizer) unless the script called it this
    step: it records whether the gradients hold an overflow, which
    scaler.update() reads."""
    if _stage_name(grad_scaler, optimizer) != "UNSCALED":
        grad_scaler.unscale_(optimizer)
