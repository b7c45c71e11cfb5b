"""The plot of compressor "auto"'s choices in `gradwire report`.

A worker's summary under --compressor=auto carries "auto_history"
(worker/auto_compression.h, written by the trainer's summary): per
evaluated step its link rate and, per layer group, the chosen ratio (Top-K's
fraction kept; 0.5 for dense 16-bit, 1 for dense fp32). plot_auto draws,
for each run that has one, the chosen ratios (log scale, one line per
group) and the link rate over the steps.
"""

from report_plots import require_matplotlib


def auto_runs(runs):
    """The runs whose summaries carry an auto_history."""
    return [r for r in runs if isinstance(r.summary.get("auto_history"), dict)]


def plot_auto(runs, path):
    """Writes PATH: one column per run of auto_runs(runs), the chosen
    ratios above and the link rate (Mbit/s) below, against the step."""
    plt = require_matplotlib()
    chosen = auto_runs(runs)
    fig, axes = plt.subplots(2, len(chosen), figsize=(6 * len(chosen), 6),
                             sharex="col", squeeze=False)
    for column, run in enumerate(chosen):
        history = run.summary["auto_history"]
        steps = history.get("steps", [])
        top, bottom = axes[0][column], axes[1][column]
        for group, ratios in history.get("ratios", {}).items():
            top.step(steps, ratios, where="post", label=group)
        top.set_yscale("log")
        top.set_ylabel("chosen ratio")
        top.set_title(run.label)
        top.legend(fontsize="x-small", loc="best")
        rates = [8 * b / 1e6 for b in history.get("link_bytes_per_second", [])]
        bottom.plot(steps, rates, color="black")
        bottom.set_ylabel("link (Mbit/s, payload)")
        bottom.set_xlabel("step")
        bottom.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
