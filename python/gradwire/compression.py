"""gradwire.Compression: one object for what is compressed, both ways.

Pushes (the workers' gradients) and pulls (the shards' weights or deltas)
are set together::

    gradwire.Compression("topk", ratio=0.01)            # pulls exact
    gradwire.Compression("none")                        # lossless both ways
    gradwire.Compression("qsgd", levels=16, pull="delta", pull_ratio=0.05)
    gradwire.Compression("powersgd", rank=4)            # low-rank matrices

A plain dict of the same keywords is accepted wherever a Compression is.
Where a script passes none, ``GRADWIRE_COMPRESSION`` may name one without
editing the script: ``none``, ``topk,ratio=0.05`` or
``qsgd,levels=16,pull=delta`` (the compressor, then keyword=value pairs).
"""

import os

from gradwire import _C

#: The environment variable that sets the compression of a script that
#: passes none (Compression.from_environment).
ENVIRONMENT_VARIABLE = "GRADWIRE_COMPRESSION"


def _group(name):
    return tuple(s["name"] for s in _C.settings()
                 if s["group"] == name and s["keyword"])


# Push keywords (see help(gradwire.ParameterSync)): the table's
# "compression" group (docs/reference/settings.md) but the compressor.
PUSH_KEYS = tuple(k for k in _group("compression") if k != "compressor")
# Pull keywords: the table's "pulls" group.
PULL_KEYS = _group("pulls")
# Decided in Python, per tensor, by DistributedOptimizer: see dense_below,
# rank and exchanges.
WRAPPER_KEYS = ("dense_below", "rank", "exchanges")
KEYS = ("compressor",) + PUSH_KEYS + PULL_KEYS + WRAPPER_KEYS
# The compressor that DistributedOptimizer runs itself, on whole matrices
# (gradwire/_lowrank.py); every tensor then crosses the sync uncompressed.
LOW_RANK = "powersgd"
# Tensors with fewer elements than this go uncompressed by default: the
# weights and biases of BatchNorm and LayerNorm, biases, a small classifier.
# A sparsifier's min_kept floor sends such a tensor a few dozen elements at
# a time in bursts that error feedback lets grow, which destabilised
# ResNet-18 (docs/convergence.md#real-models); together they are a few
# tenths of a percent of a large model's elements.
DEFAULT_DENSE_BELOW = 16384

# Compressors that send a subset of the elements: the mean of W workers'
# pushes then has at most W times their elements, which "exact" pulls send
# without loss.
SPARSIFIERS = ("topk", "randomk", "dgc", "threshold", "nonzero")


class Compression:
    """Compression settings of pushes and pulls.

    Args:
      compressor: none, fp16, bf16, topk, randomk, threshold, nonzero, dgc,
        qsgd, onebit (default topk), or powersgd: each matrix as one rank-r
        factor a step with error feedback (DistributedOptimizer and the DDP
        hook only; gradwire/_lowrank.py).
      **options: ratio, min_kept, threshold, levels, qsgd_bucket,
        onebit_bucket, value_type, error_feedback, dgc_*, dense_steps (the
        first steps' pushes uncompressed, a dense warm-up) for pushes; pull
        ("auto", "exact", "delta" or "dense"), pull_ratio, pull_value_type
        for pulls; dense_below (DistributedOptimizer only): parameters of
        fewer elements than this are pushed uncompressed (default 16384;
        0: every parameter compressed); rank (powersgd only, default 4);
        exchanges (powersgd only: 2, the default, P then Q from each
        step's gradient, as PowerSGD and DDP's powerSGD_hook; 1, the
        factors' sides in turn, one exchange a step).
        Unset ones take ParameterSync's
        defaults, except pull under DistributedOptimizer (see
        pull_for_aggregation).

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
        self.dense_below  # checked here, before anything connects
        self.rank
        self.exchanges

    @classmethod
    def of(cls, value):
        """A Compression from None (GRADWIRE_COMPRESSION, else the
        defaults), a dict of its keywords or a Compression."""
        if value is None:
            return cls.from_environment()
        if isinstance(value, Compression):
            return value
        if isinstance(value, dict):
            options = dict(value)
            return cls(options.pop("compressor", "topk"), **options)
        raise ValueError("compression: expected a gradwire.Compression or a "
                         f"dict, got {type(value).__name__}")

    @classmethod
    def parse(cls, spec):
        """A Compression from "compressor[,key=value...]"; numbers become
        int or float, true/false bools. Raises ValueError naming what is
        wrong."""
        parts = [part.strip() for part in str(spec).split(",")]
        if not parts[0] or "=" in parts[0]:
            raise ValueError(f"compression '{spec}': expected "
                             "'compressor[,key=value...]'")
        options = {}
        for part in parts[1:]:
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"compression '{spec}': '{part}' is not "
                                 "key=value")
            options[key.strip()] = _parse_value(value.strip())
        return cls(parts[0], **options)

    @classmethod
    def from_environment(cls):
        """GRADWIRE_COMPRESSION parsed, or the defaults where it is unset or
        empty. Raises ValueError naming the variable for a bad value."""
        spec = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
        if not spec:
            return cls()
        try:
            return cls.parse(spec)
        except ValueError as error:
            raise ValueError(f"{ENVIRONMENT_VARIABLE}: {error}") from None

    def pull_for_aggregation(self):
        """The pull that keeps DistributedOptimizer's mean gradient as the
        shards computed it: the one set, else "exact" beside a sparsifier
        (the mean of sparse pushes stays sparse), compressor "auto" (Top-K
        or whole, per tensor) and powersgd (dense factors, sent dense), and
        "dense" beside compressor "none"; "auto" otherwise (compressed
        deltas of the quantizers' dense means)."""
        if "pull" in self.options:
            return self.options["pull"]
        if (self.compressor in SPARSIFIERS + ("auto",)
                or self.is_low_rank):
            return "exact"
        return "dense" if self.compressor == "none" else "auto"

    @property
    def lossy_feedback(self):
        """Whether pushes are compressed with error feedback (what it holds
        back is released at a later step)."""
        return (self.compressor != "none"
                and self.options.get("error_feedback", True))

    @property
    def dense_below(self):
        """Parameters with fewer elements go uncompressed
        (DistributedOptimizer)."""
        value = self.options.get("dense_below", DEFAULT_DENSE_BELOW)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"dense_below: expected an element count >= 0, "
                             f"got {value!r}")
        return value

    @property
    def is_low_rank(self):
        """Whether DistributedOptimizer compresses the matrices itself
        (powersgd)."""
        return self.compressor == LOW_RANK

    @property
    def rank(self):
        """powersgd's rank; None for other compressors."""
        if not self.is_low_rank:
            if "rank" in self.options:
                raise ValueError(f"rank: an option of powersgd, not of "
                                 f"{self.compressor}")
            return None
        from gradwire._lowrank import DEFAULT_RANK
        value = self.options.get("rank", DEFAULT_RANK)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"rank: expected a whole number >= 1, got "
                             f"{value!r}")
        return value

    @property
    def exchanges(self):
        """powersgd's exchanges a step (1 or 2); None for other
        compressors."""
        if not self.is_low_rank:
            if "exchanges" in self.options:
                raise ValueError(f"exchanges: an option of powersgd, not of "
                                 f"{self.compressor}")
            return None
        from gradwire._lowrank import DEFAULT_EXCHANGES
        value = self.options.get("exchanges", DEFAULT_EXCHANGES)
        if isinstance(value, bool) or value not in (1, 2):
            raise ValueError(f"exchanges: expected 1 or 2, got {value!r}")
        return value

    def pushes_whole(self, parameter):
        """Whether DistributedOptimizer registers `parameter` uncompressed
        with the sync: under dense_below's count, or every parameter under
        powersgd (the matrices go out as factors, registered apart)."""
        return self.is_low_rank or parameter.numel() < self.dense_below

    def sync_options(self, aggregation=False):
        """ParameterSync keywords; with ``aggregation`` (DistributedOptimizer)
        the pull is pull_for_aggregation()'s. Raises ValueError for
        powersgd without ``aggregation``: ParameterSync has no low-rank
        compressor."""
        options = {k: v for k, v in self.options.items()
                   if k not in WRAPPER_KEYS}
        options["compressor"] = self.compressor
        if self.is_low_rank:
            if not aggregation:
                raise ValueError(
                    "compression: powersgd compresses whole matrices in "
                    "DistributedOptimizer and the DDP hook; ParameterSync "
                    "takes the per-element compressors (topk, qsgd, ...)")
            # Every tensor is registered uncompressed; the dense steps are
            # counted by the low-rank side (the sync would push the
            # factors whole, which they are anyway).
            options["compressor"] = "nonzero"
            for key in ("dense_steps", "error_feedback"):
                options.pop(key, None)
        if aggregation:
            options["pull"] = self.pull_for_aggregation()
            # A worker's memory beside its model should be what DDP's is:
            # no second residual buffer (4 bytes per element) for a pass
            # saved on large chunks.
            options.setdefault("residual_spare", False)
        return options

    def __eq__(self, other):
        return (isinstance(other, Compression)
                and self.compressor == other.compressor
                and self.options == other.options)

    def __repr__(self):
        extra = "".join(f", {k}={v!r}" for k, v in sorted(
            self.options.items()))
        return f"Compression({self.compressor!r}{extra})"


def _parse_value(text):
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
