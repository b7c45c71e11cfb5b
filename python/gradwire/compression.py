"""gradwire.Compression: one object for what is compressed, both ways.

Pushes (the workers' gradients) and pulls (the shards' weights or deltas)
are set together::

    gradwire.Compression("topk", ratio=0.01)            # pulls exact
    gradwire.Compression("none")                        # lossless both ways
    gradwire.Compression("qsgd", levels=16, pull="delta", pull_ratio=0.05)

A plain dict of the same keywords is accepted wherever a Compression is.
"""

from gradwire import _C


def _group(name):
    return tuple(s["name"] for s in _C.settings()
                 if s["group"] == name and s["keyword"])


# Push keywords (see help(gradwire.ParameterSync)): the table's
# "compression" group (docs/reference/settings.md) but the compressor.
PUSH_KEYS = tuple(k for k in _group("compression") if k != "compressor")
# Pull keywords: the table's "pulls" group.
PULL_KEYS = _group("pulls")
KEYS = ("compressor",) + PUSH_KEYS + PULL_KEYS

# Compressors that send a subset of the elements: the mean of W workers'
# pushes then has at most W times their elements, which "exact" pulls send
# without loss.
SPARSIFIERS = ("topk", "randomk", "dgc", "threshold", "nonzero")


class Compression:
    """Compression settings of pushes and pulls.

    Args:
      compressor: none, fp16, bf16, topk, randomk, threshold, nonzero, dgc,
        qsgd or onebit (default topk).
      **options: ratio, min_kept, threshold, levels, qsgd_bucket,
        onebit_bucket, value_type, error_feedback, dgc_* for pushes; pull
        ("auto", "exact", "delta" or "dense"), pull_ratio, pull_value_type
        for pulls. Unset ones take ParameterSync's defaults, except pull
        under DistributedOptimizer (see pull_for_aggregation).

    Raises ValueError naming an unknown option.
    """

    def __init__(self, compressor="topk", **options):
        for key in options:
            if key not in KEYS:
                raise ValueError(
                    f"compression: unknown option '{key}' (known: "
                    f"{', '.join(KEYS)})")
        if not isinstance(compressor, str):
            raise ValueError(f"compression: compressor must be a name, got "
                             f"{type(compressor).__name__}")
        self.compressor = compressor
        self.options = dict(options)

    @classmethod
    def of(cls, value):
        """A Compression from None (the defaults), a dict of its keywords
        or a Compression."""
        if value is None:
            return cls()
        if isinstance(value, Compression):
            return value
        if isinstance(value, dict):
            options = dict(value)
            return cls(options.pop("compressor", "topk"), **options)
        raise ValueError("compression: expected a gradwire.Compression or a "
                         f"dict, got {type(value).__name__}")

    def pull_for_aggregation(self):
        """The pull that keeps DistributedOptimizer's mean gradient as the
        shards computed it: the one set, else "exact" beside a sparsifier
        (the mean of sparse pushes stays sparse) and "dense" beside
        compressor "none"; "auto" otherwise (compressed deltas)."""
        if "pull" in self.options:
            return self.options["pull"]
        if self.compressor in SPARSIFIERS:
            return "exact"
        return "dense" if self.compressor == "none" else "auto"

    def sync_options(self, aggregation=False):
        """ParameterSync keywords; with ``aggregation`` (DistributedOptimizer)
        the pull is pull_for_aggregation()'s."""
        options = dict(self.options, compressor=self.compressor)
        if aggregation:
            options["pull"] = self.pull_for_aggregation()
        return options

    def __eq__(self, other):
        return (isinstance(other, Compression)
                and self.sync_options() == other.sync_options())

    def __repr__(self):
        extra = "".join(f", {k}={v!r}" for k, v in sorted(
            self.options.items()))
        return f"Compression({self.compressor!r}{extra})"
