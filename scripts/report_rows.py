"""The rows of a gradwire report: summaries read and checked, grouped by
label, averaged over their runs and compared with a baseline, and the
Markdown table. No matplotlib: gradwire_report.py's plots are in
report_plots.py. See gradwire_report.py for the command and the contract.
"""

import dataclasses
import json
import math

# Summaries must hold these as numbers; the others are optional.
REQUIRED_NUMBERS = ("pushed_bytes", "pulled_bytes")
OPTIONAL_NUMBERS = ("test_accuracy", "dense_equivalent_bytes", "wall_seconds",
                    "steps")
MATPLOTLIB_HINT = ("install the Debian package python3-matplotlib "
                   "(scripts/install-deps.sh installs it)")


class ReportError(Exception):
    """Input that cannot be reported on; the message names the file."""


class MissingMatplotlib(ReportError):
    """matplotlib cannot be imported by this interpreter."""


def _is_number(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def load_summary(path):
    """The summary in `path` as a dict. ReportError naming `path` when it
    cannot be read, is not one JSON object, lacks a number for pushed_bytes
    or pulled_bytes, has a non-number for test_accuracy,
    dense_equivalent_bytes, wall_seconds or steps, or has an
    epoch_test_accuracy that is not a list of numbers."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ReportError(f"{path}: cannot read it: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not a JSON file (not UTF-8 "
                          "text)") from None
    try:
        summary = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON: {e.msg} at line {e.lineno} "
                          f"column {e.colno}") from None
    if not isinstance(summary, dict):
        raise ReportError(f"{path}: not a JSON object (a gradwire summary is "
                          "one {...} object)")
    for key in REQUIRED_NUMBERS:
        if not _is_number(summary.get(key)):
            raise ReportError(f'{path}: no number "{key}" (is it a gradwire '
                              "--summary-json file?)")
    for key in OPTIONAL_NUMBERS:
        if key in summary and not _is_number(summary[key]):
            raise ReportError(f'{path}: "{key}" is not a number')
    epochs = summary.get("epoch_test_accuracy", [])
    if not isinstance(epochs, list) or not all(_is_number(a) for a in epochs):
        raise ReportError(f'{path}: "epoch_test_accuracy" is not a list of '
                          "numbers")
    return summary


@dataclasses.dataclass
class Run:
    """One summary. `label` keys its row; `title` is what tables and plots
    show (default: the label); `group` is a panel of the accuracy plot and
    a marker of the bytes plot (the benchmark's optimizer; "" for one)."""
    label: str
    summary: dict
    title: str = ""
    group: str = ""
    path: str = ""

    @property
    def accuracy(self):
        return self.summary.get("test_accuracy")

    @property
    def epoch_accuracy(self):
        return self.summary.get("epoch_test_accuracy", [])

    @property
    def total_bytes(self):
        return self.summary["pushed_bytes"] + self.summary["pulled_bytes"]


def mean(values):
    return sum(values) / len(values) if values else None


@dataclasses.dataclass
class Row:
    """The runs of one (group, label), summed up. Accuracy figures cover
    the runs that have test_accuracy (None without any); bytes and wall
    seconds are means over all runs. The comparisons are filled in by
    make_rows: None where there is nothing to compare against."""
    label: str
    title: str
    group: str
    runs: list
    accuracy_mean: float = None
    accuracy_min: float = None
    accuracy_max: float = None
    accuracy_runs: int = 0
    pushed_bytes: float = 0
    pulled_bytes: float = 0
    dense_equivalent_bytes: float = None
    wall_seconds: float = None
    points_vs_baseline: float = None
    total_reduction: float = None
    pushed_reduction: float = None
    # True when pushed_reduction is against dense_equivalent_bytes (no
    # baseline row in this group).
    pushed_reduction_estimated: bool = False

    @property
    def accuracy_half_range(self):
        if self.accuracy_mean is None:
            return None
        return (self.accuracy_max - self.accuracy_min) / 2

    @property
    def total_bytes(self):
        return self.pushed_bytes + self.pulled_bytes

    def as_dict(self):
        """The row's figures for a JSON report (runs left out)."""
        out = {f.name: getattr(self, f.name)
               for f in dataclasses.fields(self) if f.name != "runs"}
        out["runs"] = len(self.runs)
        out["accuracy_half_range"] = self.accuracy_half_range
        return out


def _summed_up(label, title, group, runs):
    row = Row(label=label, title=title or label, group=group, runs=runs)
    accuracies = [r.accuracy for r in runs if r.accuracy is not None]
    if accuracies:
        row.accuracy_mean = mean(accuracies)
        row.accuracy_min = min(accuracies)
        row.accuracy_max = max(accuracies)
        row.accuracy_runs = len(accuracies)
    row.pushed_bytes = mean([r.summary["pushed_bytes"] for r in runs])
    row.pulled_bytes = mean([r.summary["pulled_bytes"] for r in runs])
    dense = [r.summary["dense_equivalent_bytes"] for r in runs
             if "dense_equivalent_bytes" in r.summary]
    row.dense_equivalent_bytes = mean(dense) if len(dense) == len(runs) \
        else None
    walls = [r.summary["wall_seconds"] for r in runs
             if "wall_seconds" in r.summary]
    row.wall_seconds = mean(walls) if len(walls) == len(runs) else None
    return row


def _compare(row, base):
    if base is not None:
        if row.accuracy_mean is not None and base.accuracy_mean is not None:
            row.points_vs_baseline = 100 * (row.accuracy_mean -
                                            base.accuracy_mean)
        if row.total_bytes > 0:
            row.total_reduction = base.total_bytes / row.total_bytes
        if row.pushed_bytes > 0:
            row.pushed_reduction = base.pushed_bytes / row.pushed_bytes
    elif row.dense_equivalent_bytes and row.pushed_bytes > 0:
        row.pushed_reduction = row.dense_equivalent_bytes / row.pushed_bytes
        row.pushed_reduction_estimated = True


def default_baseline(runs):
    """The first label whose runs all have "compressor": "none", or None."""
    labels = list(dict.fromkeys(r.label for r in runs))
    for label in labels:
        if all(r.summary.get("compressor") == "none" for r in runs
               if r.label == label):
            return label
    return None


def make_rows(runs, baseline=None):
    """One Row per (group, label), in the order of their first run, each
    compared with the row of label `baseline` in its own group (the
    pushed reduction against dense_equivalent_bytes where that group has
    no such row)."""
    keys = list(dict.fromkeys((r.group, r.label) for r in runs))
    rows = []
    for group, label in keys:
        mine = [r for r in runs if (r.group, r.label) == (group, label)]
        rows.append(_summed_up(label, mine[0].title, group, mine))
    for row in rows:
        base = next((b for b in rows
                     if b.group == row.group and b.label == baseline), None)
        _compare(row, base)
    return rows


def _accuracy_cell(row):
    if row.accuracy_mean is None:
        return "—"
    text = f"{row.accuracy_mean:.4f}"
    if row.accuracy_runs > 1:
        text += f" ± {row.accuracy_half_range:.4f}"
    if row.accuracy_runs < len(row.runs):
        text += f" ({row.accuracy_runs} of {len(row.runs)} runs)"
    return text


def _reduction_cell(value, estimated=False):
    if value is None:
        return "—"
    text = f"{value:.1f}" if value >= 1 else f"{value:.2g}"
    return text + "×" + ("†" if estimated else "")


def markdown_table(rows, baseline_title=None, group_name="group"):
    """The table as Markdown lines (a note on the statistics, the table,
    and a footnote where † is used). `baseline_title` names the baseline in
    the headers; the group column (headed `group_name`) appears only when
    some row has a group."""
    with_group = any(r.group for r in rows)
    base = baseline_title or "baseline"
    vs = f"vs {base}" if baseline_title else "vs baseline"
    head = ["setting"] + ([group_name] if with_group else []) + [
        "runs", "test accuracy", f"{vs} (points)", "pushed MB", "pulled MB",
        f"push+pull {vs}", f"pushed {vs}", "wall s"]
    lines = [
        "Test accuracy: the final test accuracy, mean ± half the range "
        "((max − min) / 2) over a row's runs; bytes and wall seconds: "
        "means.",
        "",
        "| " + " | ".join(head) + " |",
        "|---" + ("|---" if with_group else "") + "|---:" * 8 + "|",
    ]
    for r in rows:
        cells = [r.title] + ([r.group] if with_group else []) + [
            str(len(r.runs)),
            _accuracy_cell(r),
            "—" if r.points_vs_baseline is None
            else f"{r.points_vs_baseline:+.2f}",
            f"{r.pushed_bytes / 1e6:.1f}",
            f"{r.pulled_bytes / 1e6:.1f}",
            _reduction_cell(r.total_reduction),
            _reduction_cell(r.pushed_reduction, r.pushed_reduction_estimated),
            "—" if r.wall_seconds is None else f"{r.wall_seconds:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if any(r.pushed_reduction_estimated for r in rows):
        lines += ["", "† against the summaries' dense_equivalent_bytes (what "
                  "dense fp32 pushes would have sent): no baseline row to "
                  "measure against."]
    return lines + _startup_lines(rows)


def _startup_lines(rows):
    """What the runs sent and received before step 0 (the Init exchange and
    the first pull) and how long that took, means over the runs whose
    summaries carry it; nothing when none does (older summaries)."""
    lines = []
    for r in rows:
        runs = [x.summary for x in r.runs if "startup_sent_bytes" in x.summary]
        if not runs:
            continue
        sent = mean([s["startup_sent_bytes"] for s in runs])
        received = mean([s.get("startup_received_bytes", 0) for s in runs])
        seconds = mean([s.get("startup_seconds", 0) for s in runs])
        lines.append(f"- {r.title}: {sent / 1e6:.2f} MB sent, "
                     f"{received / 1e6:.2f} MB received, {seconds:.1f} s")
    if not lines:
        return []
    return ["", "Start-up before step 0 (Init and the first pull; means):",
            ""] + lines
