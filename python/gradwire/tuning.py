"""gradwire.tuning: knobs for speed, memory and fine adjustment.

A script needs none of them: the defaults suit a model of a few million
parameters on a few cores. compress_threads, push_bucket_bytes and
residual_spare change speed and memory only; partition_bytes also bounds
the chunk a sparsifier chooses within, and min_kept and fold_scale change
what a step sends or applies.

* ``tune_heap()``: keeps a step's large buffers in the heap between steps
  (glibc's malloc thresholds, as ``gradwire-worker --tune-heap``);
  settings in GLIBC_TUNABLES or MALLOC_*_THRESHOLD_ win. Returns
  (applied, description). Affects the whole process: call it first.
* The keywords in KEYWORDS, given to ParameterSync, DistributedOptimizer
  or DDPHookState (``min_kept`` inside ``compression=gradwire.Compression
  (...)``, since it belongs to the sparsifiers); ``defaults()`` gives their
  defaults from the settings table (docs/reference/settings.md).
"""

from gradwire._C import settings, tune_heap

__all__ = ["KEYWORDS", "defaults", "tune_heap"]

#: The tuning keywords: chunking and threads (partition_bytes,
#: compress_threads, push_bucket_bytes), memory against a pass
#: (residual_spare), the sparsifiers' floor (min_kept, a Compression
#: keyword) and folded momentum's step (fold_scale).
KEYWORDS = ("partition_bytes", "compress_threads", "push_bucket_bytes",
            "residual_spare", "min_kept", "fold_scale")


def defaults():
    """{keyword: default} of KEYWORDS, as the settings table declares
    them."""
    table = {s["name"]: s["default"] for s in settings()}
    return {key: table[key] for key in KEYWORDS}
