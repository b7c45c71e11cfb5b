"""A DistributedOptimizer's figures written to JSON files when it closes or
the process exits, for benchmarks, job logs and `gradwire run`'s report,
without changing the training script:

- GRADWIRE_STATS_JSON: every field of gradwire.SyncStats (bytes pushed and
  pulled, start-up bytes and seconds, seconds spent reducing, compressing,
  pushing and pulling) and ``exchange_seconds``: wall time the training
  thread spent in the exchange (synchronize(), or step() when updates are
  exchanged), so that a step's time splits into that and the rest. Its
  ``steps`` counts exchanges, as the shards do.
- GRADWIRE_SUMMARY_JSON (set by `gradwire run`): the worker summary that
  gradwire run combines into its closing report (docs/run.md): training
  steps (powersgd's second exchange is part of its step), wall seconds
  since the optimizer was made, bytes both ways, the dense fp32 bytes of
  the same steps, start-up figures, and ``"evaluated": false`` (the
  script's own accuracy is not known here).

Either path may hold "{rank}", replaced by the worker's rank.
"""

import atexit
import json
import os
import time
import weakref

from gradwire import _env

VARIABLE = "GRADWIRE_STATS_JSON"
SUMMARY_VARIABLE = "GRADWIRE_SUMMARY_JSON"
_FIELDS = ("steps", "pushed_bytes", "pulled_bytes", "dense_equivalent_bytes",
           "init_bytes", "startup_bytes_sent", "startup_bytes_received",
           "startup_seconds", "retries", "reduce_seconds", "compress_seconds",
           "push_seconds", "pull_seconds", "pull_wait_seconds")


def stats_dict(optimizer):
    """The optimizer's figures as a dict of plain numbers."""
    stats = optimizer.stats
    figures = {field: getattr(stats, field) for field in _FIELDS}
    figures["exchange_seconds"] = optimizer.exchange_seconds
    figures["exchange"] = optimizer.exchange
    figures["rank"] = _env.rank()
    return figures


def run_summary(optimizer, wall_seconds):
    """The worker summary of `gradwire run` (GRADWIRE_SUMMARY_JSON)."""
    stats = optimizer.stats
    return {
        "steps": stats.steps - optimizer.inner_exchanges,
        "wall_seconds": wall_seconds,
        "train_seconds": wall_seconds,
        "pushed_bytes": stats.pushed_bytes,
        "pulled_bytes": stats.pulled_bytes,
        "dense_equivalent_bytes": (stats.dense_equivalent_bytes
                                   - optimizer.inner_dense_bytes),
        "startup_sent_bytes": stats.startup_bytes_sent,
        "startup_received_bytes": stats.startup_bytes_received,
        "startup_seconds": stats.startup_seconds,
        "exchange_seconds": optimizer.exchange_seconds,
        "retries": stats.retries,
        "evaluated": False,
    }


def write_at_exit(optimizer, environ=os.environ):
    """When $GRADWIRE_STATS_JSON or $GRADWIRE_SUMMARY_JSON is set: a
    function that writes their files once (later calls do nothing), also
    registered to run at exit; holds the optimizer weakly. The optimizer
    calls it with itself from close() and when it is collected, before its
    figures go. None when neither is set."""
    made = time.monotonic()
    files = [(environ.get(variable, ""), figures) for variable, figures in (
        (VARIABLE, stats_dict),
        (SUMMARY_VARIABLE,
         lambda live: run_summary(live, time.monotonic() - made)))]
    files = [(path.replace("{rank}", str(_env.rank())), figures)
             for path, figures in files if path]
    if not files:
        return None
    reference = weakref.ref(optimizer)
    written = []

    def write(live=None):
        live = live if live is not None else reference()
        if live is None or written:
            return
        for path, figures in files:
            with open(path, "w") as out:
                json.dump(figures(live), out, indent=1)
            written.append(path)

    atexit.register(write)
    return write
