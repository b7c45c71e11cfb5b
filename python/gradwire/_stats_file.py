"""GRADWIRE_STATS_JSON: a DistributedOptimizer's figures written to a JSON
file when the process exits, for benchmarks and job logs that want them
without changing the training script.

The path may hold "{rank}", replaced by the worker's rank. The file holds
every field of gradwire.SyncStats (bytes pushed and pulled, start-up bytes
and seconds, seconds spent reducing, compressing, pushing and pulling) and
``exchange_seconds``: wall time the training thread spent in the exchange
(synchronize(), or step() when updates are exchanged), so that a step's
time splits into that and the rest.
"""

import atexit
import json
import os
import weakref

from gradwire import _env

VARIABLE = "GRADWIRE_STATS_JSON"
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


def write_at_exit(optimizer, environ=os.environ):
    """When $GRADWIRE_STATS_JSON is set: a function that writes
    stats_dict(optimizer) there once (later calls do nothing), also
    registered to run at exit; holds the optimizer weakly. The optimizer
    calls it with itself from close() and when it is collected, before its
    figures go. None when unset."""
    path = environ.get(VARIABLE, "")
    if not path:
        return None
    path = path.replace("{rank}", str(_env.rank()))
    reference = weakref.ref(optimizer)
    written = []

    def write(live=None):
        live = live if live is not None else reference()
        if live is None or written:
            return
        figures = stats_dict(live)
        with open(path, "w") as out:
            json.dump(figures, out, indent=1)
        written.append(path)

    atexit.register(write)
    return write
