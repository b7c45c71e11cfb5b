"""What every figure module shares: the data files' paths, the table of
figures (FIGURES, which figures.py reads, filled by the @figure
decorator) and the arithmetic and wording of a figure's text.

A function gets the data files' JSON, in the order of its paths, and
returns the text that stands between the figure's markers in the Markdown.
Where a figure rests on repeated runs (or seeds), its text is the median
(accuracy over seeds: the mean, as docs/convergence.md gives it) and says
how many runs and their range.
"""

from figures_provenance import machines

DATA = "docs/benchmarks/data"
MODELS = f"{DATA}/models-2026-12-06.json"
POWERSGD = f"{DATA}/models-powersgd-2026-12-07.json"
COMPRESS = f"{DATA}/compress.json"
COMPRESS_25M = f"{DATA}/compress-25m-spare.json"
AUTO = f"{DATA}/auto-chooser-settled-2026-12-05.json"
AUTO_GPT = f"{DATA}/auto-gpt-2026-12-07.json"
LOAD = (f"{DATA}/load-asp-since-44-new-1.json",
        f"{DATA}/load-asp-since-44-new-2.json")
LOAD_SHARED = f"{DATA}/load-asp-shared-vs-per-worker.json"
LOAD_PUBLISH = f"{DATA}/load-asp-publish-every.json"
NETWORK = tuple(f"{DATA}/network-{link}-200steps-buckets.json"
                for link in ("1gbit", "100mbit", "10mbit"))
LINKS = {"10mbit": "at 10 Mbit/s", "100mbit": "at 100 Mbit/s",
         "1gbit": "at 1 Gbit/s", "unshaped": "on unshaped links"}
KERNELS = {"avx512": "AVX-512", "avx2": "AVX2", "portable": "portable"}

FIGURES = {}


def figure(name, *sources):
    """Registers the decorated function as the figure NAME, computed from
    the data files SOURCES (paths from the repository's root)."""
    def register(compute):
        FIGURES[name] = (sources, compute)
        return compute
    return register


# Arithmetic and wording.

def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def spread(values, show, unit="runs"):
    """How the repeats behind a median read: 'one run', 'the same in
    each of 3 seeds' (every repeat shows the same), or 'median of 2 runs,
    5,898–5,995'."""
    if len(values) == 1:
        return f"one {unit[:-1]}"
    low, high = show(min(values)), show(max(values))
    if low == high:
        return f"the same in each of {len(values)} {unit}"
    return f"median of {len(values)} {unit}, {low}–{high}"


def listed(words):
    words = list(words)
    return words[0] if len(words) == 1 else \
        ", ".join(words[:-1]) + " and " + words[-1]


def seeds(runs):
    found = sorted({r["seed"] for r in runs})
    return ("seed " if len(found) == 1 else "seeds ") + \
        listed(str(s) for s in found)


def times(ratio):
    return f"{ratio:.1f}×" if ratio >= 2 else f"{ratio:.2f}×"


def megabytes(value):
    return f"{value / 1e6:.2f} MB"


def machine(*documents):
    """'2-core Intel Xeon': the machines the documents record."""
    names = sorted({m for d in documents for m in machines(d)})
    return listed(names) if names else "machine the data do not name"
