"""What a training script watches: per-step figures of the exchange for
TensorBoard or W&B (``log_metrics``), and the process's Prometheus
endpoint (``GRADWIRE_METRICS_PORT``, which ``gradwire run`` sets; with
``GRADWIRE_METRICS_LINGER_SECONDS``, which ``gradwire run --dashboard``
sets, it stays up that long when the script ends, so that Prometheus
scrapes the final counts).

The figures (DistributedOptimizer.metrics(), DDPHookState.metrics()) are
per step, averaged over the steps since the previous call, under names
that stay the same from release to release:

  gradwire/steps                    steps since the previous call
  gradwire/bytes_sent               pushed per step (serialized messages)
  gradwire/bytes_received           pulled per step
  gradwire/dense_equivalent_bytes   what dense fp32 pushes would have sent
  gradwire/compression_ratio        dense_equivalent_bytes / bytes_sent
  gradwire/exchange_seconds         the training thread's wait per step
  gradwire/residual_norm            L2 norm of the error-feedback residuals
  gradwire/bytes_sent_total         since the start (start-up excluded)
  gradwire/bytes_received_total
  gradwire/skipped_steps            steps skipped on every worker because a
                                    worker's gradients were not finite
  gradwire/auto_ratio/<tensor>      compressor auto's ratio per registered
                                    tensor (1: dense), where auto runs
"""

import atexit
import os
import sys
import time
import weakref

from gradwire import _C, _env

PREFIX = "gradwire/"
PORT_VARIABLE = "GRADWIRE_METRICS_PORT"
ADDRESS_VARIABLE = "GRADWIRE_METRICS_ADDRESS"
PORT_FILE_VARIABLE = "GRADWIRE_METRICS_PORT_FILE"
LINGER_VARIABLE = "GRADWIRE_METRICS_LINGER_SECONDS"
# gradwire-worker's bound on its --metrics-linger-seconds.
MAX_LINGER_SECONDS = 3600

# Whether the wait at exit is registered (once per process, as the
# endpoint).
_lingering = False

# Every DistributedOptimizer alive in this process (the DDP hook's included),
# for log_metrics() without a source.
_live = weakref.WeakSet()


def serve_from_environment(environ=os.environ):
    """Starts this process's /metrics endpoint where $GRADWIRE_METRICS_PORT
    is set (0: a free port; -1 or empty: none) on $GRADWIRE_METRICS_ADDRESS
    (default 127.0.0.1), writing the port to $GRADWIRE_METRICS_PORT_FILE
    ("{rank}" replaced by the rank) when set. With
    $GRADWIRE_METRICS_LINGER_SECONDS (seconds, 0 to 3600), the process
    keeps the endpoint up that long at exit (_linger_at_exit). Returns the
    port, or None. Raises ValueError naming the variable for a value that
    is not a port or not such seconds."""
    text = environ.get(PORT_VARIABLE, "").strip()
    if text in ("", "-1"):
        return None
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"{PORT_VARIABLE}={text!r}: expected a TCP port "
                         "(0 picks a free one; -1 serves none)") from None
    linger = _linger_seconds(environ)
    address = environ.get(ADDRESS_VARIABLE, "") or "127.0.0.1"
    port_file = environ.get(PORT_FILE_VARIABLE, "")
    if "{rank}" in port_file:
        # RANK as torchrun sets it: the shards need not be known yet.
        rank = _env._integer(environ, "RANK", 0, 0)
        port_file = port_file.replace("{rank}", str(rank))
    try:
        served = _C.serve_metrics(address, port, port_file)
    except ValueError as e:
        raise ValueError(f"{PORT_VARIABLE}: {e}") from None
    global _lingering
    if linger > 0 and not _lingering:
        atexit.register(_linger_at_exit, linger)
        _lingering = True
    return served


def _linger_seconds(environ):
    """$GRADWIRE_METRICS_LINGER_SECONDS as seconds; 0 when unset or empty."""
    text = environ.get(LINGER_VARIABLE, "").strip()
    if not text:
        return 0.0
    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is None or not 0 <= seconds <= MAX_LINGER_SECONDS:
        raise ValueError(f"{LINGER_VARIABLE}={text!r}: expected seconds "
                         f"from 0 to {MAX_LINGER_SECONDS}")
    return seconds


def _linger_at_exit(seconds):
    """Keeps the endpoint (never closed) up `seconds` more, so that a
    Prometheus that finds it late still scrapes the final counts. Not after
    an uncaught exception: a failing worker must be seen failing at once;
    Ctrl-C ends the wait."""
    if getattr(sys, "last_value", None) is not None:
        return
    try:
        time.sleep(seconds)
    except KeyboardInterrupt:
        pass


def track(optimizer):
    """Counts `optimizer` among the live ones (log_metrics without a
    source)."""
    _live.add(optimizer)


def untrack(optimizer):
    """Leaves a closed `optimizer` out of the live ones."""
    _live.discard(optimizer)


class StepFigures:
    """The figures above for one exchange, from its running totals: each
    read() covers the steps since the previous one."""

    def __init__(self):
        self._last = None

    def read(self, optimizer):
        stats = optimizer.stats
        # A step's exchanges after its first are part of that step.
        inner = getattr(optimizer, "inner_exchanges", 0)
        inner_dense = getattr(optimizer, "inner_dense_bytes", 0)
        now = {"steps": stats.steps - inner, "sent": stats.pushed_bytes,
               "received": stats.pulled_bytes,
               "dense": stats.dense_equivalent_bytes - inner_dense,
               "seconds": optimizer.exchange_seconds}
        last = self._last or dict.fromkeys(now, 0)
        self._last = now
        delta = {k: now[k] - last[k] for k in now}
        steps = delta["steps"]
        per_step = max(steps, 1)
        figures = {
            "steps": steps,
            "bytes_sent": delta["sent"] / per_step,
            "bytes_received": delta["received"] / per_step,
            "dense_equivalent_bytes": delta["dense"] / per_step,
            "compression_ratio": (delta["dense"] / delta["sent"]
                                  if delta["sent"] else 0.0),
            "exchange_seconds": delta["seconds"] / per_step,
            "residual_norm": optimizer._residual_norm(),
            "bytes_sent_total": now["sent"],
            "bytes_received_total": now["received"],
            "skipped_steps": getattr(optimizer._skip, "skipped_steps", 0),
        }
        for tensor, ratio in optimizer._sync.auto_ratios().items():
            if _is_parameter(tensor):
                figures["auto_ratio/" + tensor] = ratio
        return {PREFIX + name: value for name, value in figures.items()}


def _is_parameter(name):
    """Whether a registered tensor is one of the model's parameters, not a
    buffer or the skip flag, which always go uncompressed."""
    # Here, not at the top: _aggregation imports _sync, which imports this.
    from gradwire._aggregation import BUFFER_PREFIX
    from gradwire._nonfinite import FLAG_NAME
    return name != FLAG_NAME and not name.startswith(BUFFER_PREFIX)


def _source(source):
    if source is not None:
        return source
    live = list(_live)
    if len(live) == 1:
        return live[0]
    if not live:
        raise ValueError(
            "log_metrics: no DistributedOptimizer or DDP hook has started in "
            "this process yet (the hook starts at its first step); call it "
            "after a step, or pass source=")
    raise ValueError(f"log_metrics: {len(live)} DistributedOptimizers live "
                     "in this process; pass the one to log as source=")


def log_metrics(logger, step, source=None):
    """Writes the exchange's figures (module doc) for the steps since the
    last call to `logger` at `step`, and returns them as a dict.

    Args:
      logger: anything with TensorBoard's ``add_scalar(tag, value,
        global_step)`` (torch.utils.tensorboard.SummaryWriter, tensorboardX)
        or W&B's ``log(dict, step=)`` (a wandb run, or the wandb module).
      step: the global step to log them at.
      source: the DistributedOptimizer or DDPHookState; by default the one
        live in this process.

    Raises TypeError for a logger with neither method, ValueError when no
    source is given and not exactly one is live."""
    add_scalar = getattr(logger, "add_scalar", None)
    log = getattr(logger, "log", None)
    if not callable(add_scalar) and not callable(log):
        raise TypeError(
            f"logger: a {type(logger).__name__} has neither add_scalar "
            "(TensorBoard's SummaryWriter) nor log (a W&B run)")
    figures = _source(source).metrics()
    if callable(add_scalar):
        for name, value in figures.items():
            add_scalar(name, value, step)
    else:
        log(dict(figures), step=step)
    return figures
