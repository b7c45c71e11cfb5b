"""gradwire.ParameterSync: the package's ParameterSync (_sync.py) as a
script makes it. A script's keywords of the release before still work and
warn once (_renamed.py): worker_id and num_workers (now node_rank and
num_nodes), and compression keywords passed loose (now
``compression=gradwire.Compression(...)``). The package's own callers
(DistributedOptimizer's shards side) use _sync.ParameterSync, which
spreads its compression's keywords without a warning."""

from gradwire import _renamed, _sync
from gradwire.compression import KEYS as _COMPRESSION_KEYS


class ParameterSync(_sync.ParameterSync):
    __doc__ = _sync.ParameterSync.__doc__

    def __init__(self, **options):
        """Raises ValueError for an old keyword given with its new one
        (worker_id with node_rank, num_workers with num_nodes), and as
        the package's ParameterSync otherwise."""
        options = _renamed.renamed_keywords(options, "ParameterSync", 2)
        _renamed.loose_compression(options, _COMPRESSION_KEYS, 2)
        super().__init__(**options)
