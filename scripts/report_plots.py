"""The two plots of a gradwire report (gradwire_report.py): test accuracy
against epoch, and final accuracy against bytes pushed + pulled. Imports
matplotlib only in require_matplotlib, with the Agg backend.
"""

import math
import sys

from report_rows import MATPLOTLIB_HINT, MissingMatplotlib, mean

def require_matplotlib():
    """matplotlib.pyplot with the Agg backend; MissingMatplotlib (naming
    the Debian package) when it cannot be imported."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise MissingMatplotlib(
            f"matplotlib is missing for {sys.executable} ({e}): "
            f"{MATPLOTLIB_HINT}") from None
    return plt


def _colors(rows):
    """A color per label, the same in every panel and plot."""
    labels = list(dict.fromkeys(r.label for r in rows))
    palette = [f"C{i}" for i in range(10)]
    return {label: palette[i % len(palette)] for i, label in enumerate(labels)}


def _groups(rows):
    return list(dict.fromkeys(r.group for r in rows))


def _epoch_band(row):
    """Per epoch (1, 2, ...): mean, min and max over the runs that have
    that epoch's test accuracy."""
    longest = max((len(r.epoch_accuracy) for r in row.runs), default=0)
    epochs, means, lows, highs = [], [], [], []
    for e in range(longest):
        values = [r.epoch_accuracy[e] for r in row.runs
                  if len(r.epoch_accuracy) > e]
        epochs.append(e + 1)
        means.append(mean(values))
        lows.append(min(values))
        highs.append(max(values))
    return epochs, means, lows, highs


# Axes narrower than these are widened about their middle, so that near-equal
# values (one run, or rows that differ in the last digits) are not magnified
# into noise: 2 points of accuracy, a factor of 6 of bytes.
_MIN_ACCURACY_SPAN = 0.02
_MIN_BYTES_FACTOR = 6.0


def _widen_linear(set_limits, values, min_span):
    if not values:
        return
    lo, hi = min(values), max(values)
    if hi - lo < min_span:
        middle = (lo + hi) / 2
        set_limits(middle - min_span / 2 - min_span * 0.05,
                   middle + min_span / 2 + min_span * 0.05)


def _widen_log(set_limits, values, min_factor):
    if not values:
        return
    lo, hi = min(values), max(values)
    if hi < lo * min_factor:
        middle = math.sqrt(lo * hi)
        set_limits(middle / math.sqrt(min_factor),
                   middle * math.sqrt(min_factor))


def _group_title(group, group_name):
    return f"{group_name}: {group}" if group else ""


def plot_accuracy(rows, path, group_name="group", title=""):
    """Writes `path` (PNG): test accuracy against epoch, one panel per
    group, one line per row (the mean over its runs) with a shaded min-max
    band where it has several runs."""
    plt = require_matplotlib()
    from matplotlib.ticker import MaxNLocator, MultipleLocator
    groups = _groups(rows)
    colors = _colors(rows)
    fig, axes = plt.subplots(1, len(groups), figsize=(6.4 * len(groups), 4.8),
                             sharey=True, squeeze=False)
    longest = 1
    accuracies = []
    for ax, group in zip(axes[0], groups):
        drawn = 0
        for row in (r for r in rows if r.group == group):
            epochs, means, lows, highs = _epoch_band(row)
            if not epochs:
                continue
            longest = max(longest, len(epochs))
            accuracies += lows + highs
            color = colors[row.label]
            ax.plot(epochs, means, marker="o", markersize=4, color=color,
                    label=f"{row.title} ({len(row.runs)})"
                    if len(row.runs) > 1 else row.title)
            if len(row.runs) > 1:
                ax.fill_between(epochs, lows, highs, color=color, alpha=0.2,
                                linewidth=0)
            drawn += 1
        if drawn:
            ax.legend(fontsize="small", loc="lower right")
        else:
            ax.text(0.5, 0.5, "no epoch_test_accuracy in these summaries",
                    ha="center", va="center", transform=ax.transAxes)
        ax.set_title(_group_title(group, group_name))
        ax.set_xlabel("epoch")
        ax.grid(True, alpha=0.3)
    for ax in axes[0]:
        ax.set_xlim(0.5, longest + 0.5)
        ax.xaxis.set_major_locator(
            MultipleLocator(1) if longest <= 20 else MaxNLocator(integer=True))
    _widen_linear(axes[0][0].set_ylim, accuracies, _MIN_ACCURACY_SPAN)
    axes[0][0].set_ylabel("test accuracy")
    fig.suptitle(title or "Test accuracy per epoch (mean over runs; band: "
                 "min–max; (n): runs)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _bytes_label(value, _position=None):
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:g} {unit}"
    return f"{value:g} B"


_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
_GROUP_DODGE = 1.05


def plot_bytes(rows, path, group_name="group", title=""):
    """Writes `path` (PNG): final test accuracy against bytes pushed +
    pulled (log scale), one point per row with accuracy (mean; error bars
    min-max over its runs), a color per label and a marker per group; the
    groups' points are drawn 5% apart on the bytes axis."""
    plt = require_matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    groups = _groups(rows)
    colors = _colors(rows)
    markers = {g: _MARKERS[i % len(_MARKERS)] for i, g in enumerate(groups)}
    fig, ax = plt.subplots(figsize=(8.0, 5.0))
    shown = [r for r in rows if r.accuracy_mean is not None
             and r.total_bytes > 0]
    # The groups of one label send about the same bytes: each group's points
    # sit a few percent to the side (_GROUP_DODGE), so that none hides
    # another.
    dodge = {g: _GROUP_DODGE**(i - (len(groups) - 1) / 2)
             for i, g in enumerate(groups)}
    for row in shown:
        ax.errorbar([row.total_bytes * dodge[row.group]], [row.accuracy_mean],
                    yerr=[[row.accuracy_mean - row.accuracy_min],
                          [row.accuracy_max - row.accuracy_mean]],
                    marker=markers[row.group], color=colors[row.label],
                    markersize=7, capsize=3, linestyle="none")
    ax.set_xscale("log")
    ax.margins(x=0.08, y=0.08)
    _widen_log(ax.set_xlim, [r.total_bytes for r in shown], _MIN_BYTES_FACTOR)
    _widen_linear(ax.set_ylim,
                  [a for r in shown for a in (r.accuracy_min, r.accuracy_max)],
                  _MIN_ACCURACY_SPAN)
    # 1, 2 and 5 per decade: the rows often span less than two decades.
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(_bytes_label))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("bytes pushed + pulled (all workers; log scale)")
    ax.set_ylabel("final test accuracy")
    ax.grid(True, which="both", alpha=0.3)
    if not shown:
        ax.text(0.5, 0.5, "no test_accuracy in these summaries",
                ha="center", va="center", transform=ax.transAxes)
    labels = list(dict.fromkeys((r.label, r.title) for r in shown))
    handles = [Line2D([], [], color=colors[label], marker="o",
                      linestyle="none", label=row_title)
               for label, row_title in labels]
    if groups != [""]:
        handles += [Line2D([], [], color="0.4", marker=markers[g],
                           linestyle="none",
                           label=_group_title(g, group_name) or "(none)")
                    for g in groups]
    if handles:
        ax.legend(handles=handles, fontsize="small", loc="upper left",
                  bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    offset = (f"; {group_name}s {100 * (_GROUP_DODGE - 1):.0f}% apart"
              if len(groups) > 1 else "")
    ax.set_title(title or "Final test accuracy against bytes on the wire "
                 f"(mean; bars: min–max{offset})")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
