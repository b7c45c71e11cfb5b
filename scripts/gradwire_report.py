#!/usr/bin/python3
"""Tables and plots of gradwire runs, from their summary JSON files.

  gradwire_report.py [--out=DIR] [--prefix=NAME] [--baseline=LABEL]
                     [--label=NAME=FILE ...] SUMMARY.json ...

(`gradwire report ...` runs this script.) Reads the summaries that
`gradwire local --summary-json`, `gradwire-worker --summary-json` or
bench/python/worker.py write, one JSON object per file, and

  - prints a table (Markdown), one line per label: the final test accuracy
    as mean ± half the range ((max - min) / 2) over the label's runs, its
    difference to the baseline in points, pushed and pulled MB (means),
    the reduction of pushed + pulled and of pushed bytes against the
    baseline, and wall seconds (mean); also written to DIR/NAME.md;
  - draws DIR/NAME-accuracy.png: test accuracy against epoch (the
    summaries' epoch_test_accuracy), one line per label (mean over its
    runs) in a shaded min-max band;
  - draws DIR/NAME-bytes.png: final test accuracy against bytes pushed +
    pulled (log scale), one point per label with min-max error bars;
  - draws DIR/NAME-auto.png when runs used --compressor=auto: the ratio
    chosen for each layer and the measured link rate over the steps
    (report_auto.py).

A file's label is its name without .json, or NAME for --label=NAME=FILE
(FILE need not be repeated as an argument). Files that share a label (the
seeds of one setting) are one row. Rows come in the order of their first
file on the command line. The baseline (--baseline, default: the first
label whose runs all have "compressor": "none") is what the points and the
reductions are measured against; without one, the pushed reduction is
taken against the summaries' dense_equivalent_bytes (marked †) and the
other comparisons are left out.

A summary without test_accuracy still gives bytes and wall time; it is
left out of the accuracy columns and the plots.

Exit codes: 0; 1 when a summary cannot be read or is not a gradwire summary
(the message names the file) or matplotlib is missing (Debian package
python3-matplotlib); 2 for a bad command line.

The benchmark bench/convergence/ (convergence.py, convergence_results.py)
imports this module (which re-exports report_rows.py and report_plots.py):
load_summary, Run, make_rows (Row), default_baseline, markdown_table,
require_matplotlib, plot_accuracy, plot_bytes and write_report are its
interface. Matplotlib is imported only by require_matplotlib (with the Agg
backend: no display needed).
"""


import argparse
import os
import sys

from report_auto import auto_runs, plot_auto
from report_plots import plot_accuracy, plot_bytes, require_matplotlib
from report_rows import (MissingMatplotlib, ReportError, Row, Run,
                         default_baseline, load_summary, make_rows,
                         markdown_table)

__all__ = ["MissingMatplotlib", "ReportError", "Row", "Run",
           "default_baseline", "load_summary", "make_rows", "markdown_table",
           "plot_accuracy", "plot_bytes", "require_matplotlib",
           "write_report", "main"]


def write_report(rows, out_dir, prefix, baseline_title=None,
                 group_name="group", header=()):
    """Writes OUT_DIR/PREFIX.md (`header` lines, then the table) and the two
    plots, PREFIX-accuracy.png and PREFIX-bytes.png; returns the Markdown
    text."""
    os.makedirs(out_dir, exist_ok=True)
    text = "\n".join(list(header) +
                     markdown_table(rows, baseline_title, group_name)) + "\n"
    with open(os.path.join(out_dir, f"{prefix}.md"), "w") as f:
        f.write(text)
    plot_accuracy(rows, os.path.join(out_dir, f"{prefix}-accuracy.png"),
                  group_name)
    plot_bytes(rows, os.path.join(out_dir, f"{prefix}-bytes.png"),
               group_name)
    return text


# The command line.

_VALUE_OPTIONS = ("--out", "--prefix", "--baseline", "--label")


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, "PROG: MESSAGE (see PROG --help)", exit 2
    (the gradwire commands' convention)."""

    def error(self, message):
        sys.stderr.write(f"{self.prog}: {message} (see {self.prog} --help)\n")
        sys.exit(2)


def _parser(prog):
    p = _Parser(prog=prog, allow_abbrev=False,
                description="Tables and plots of gradwire runs from their "
                "summary JSON files (see the top of scripts/"
                "gradwire_report.py).")
    p.add_argument("--out", default=".", metavar="DIR",
                   help="write PREFIX.md, PREFIX-accuracy.png and "
                   "PREFIX-bytes.png here (default: .)")
    p.add_argument("--prefix", default="report", metavar="NAME",
                   help="file name prefix (default: report)")
    p.add_argument("--baseline", metavar="LABEL",
                   help="the row to compare with (default: the first label "
                   'whose runs have "compressor": "none")')
    p.add_argument("--label", action="append", default=[],
                   metavar="NAME=FILE", help="read FILE as a run of NAME")
    p.add_argument("files", nargs="*", metavar="SUMMARY.json")
    return p


def _inputs_in_order(argv, parser):
    """(label, file) for every input, in command-line order, each file
    once (its explicit label wins)."""
    explicit = {}
    order = []
    i = 0
    only_files = False
    while i < len(argv):
        arg = argv[i]
        if only_files or not arg.startswith("-") or arg == "-":
            order.append(arg)
        elif arg == "--":
            only_files = True
        elif arg in _VALUE_OPTIONS:
            if arg == "--label" and i + 1 < len(argv):
                order.append(("label", argv[i + 1]))
            i += 1
        elif arg.startswith("--label="):
            order.append(("label", arg[len("--label="):]))
        i += 1
    inputs = []
    for item in order:
        if isinstance(item, tuple):
            name, sep, path = item[1].partition("=")
            if not sep or not name or not path:
                parser.error(f"--label={item[1]}: expected NAME=FILE")
            if explicit.get(path, name) != name:
                parser.error(f"{path} is labelled both {explicit[path]} and "
                             f"{name}")
            explicit[path] = name
            inputs.append(path)
        else:
            inputs.append(item)
    inputs = list(dict.fromkeys(inputs))
    return [(explicit.get(path) or _default_label(path), path)
            for path in inputs]


def _default_label(path):
    name = os.path.basename(path)
    return name[:-len(".json")] if name.endswith(".json") else name


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    prog = os.environ.get("GRADWIRE_REPORT_PROG") or "gradwire_report.py"
    parser = _parser(prog)
    args = parser.parse_intermixed_args(argv)
    inputs = _inputs_in_order(argv, parser)
    if not inputs:
        parser.error("no summary files given")
    if not args.prefix or "/" in args.prefix:
        parser.error(f"--prefix: '{args.prefix}' is not a file name prefix")
    labels = [label for label, _ in inputs]
    if args.baseline is not None and args.baseline not in labels:
        parser.error(f"--baseline: no label '{args.baseline}' among "
                     f"{', '.join(dict.fromkeys(labels))}")
    try:
        require_matplotlib()
        runs = [Run(label=label, summary=load_summary(path), path=path)
                for label, path in inputs]
        baseline = args.baseline or default_baseline(runs)
        rows = make_rows(runs, baseline)
        text = write_report(rows, args.out, args.prefix, baseline)
        if auto_runs(runs):
            plot_auto(runs, os.path.join(args.out, f"{args.prefix}-auto.png"))
    except ReportError as e:
        sys.stderr.write(f"{prog}: {e}\n")
        return 1
    except OSError as e:
        sys.stderr.write(f"{prog}: cannot write to {args.out}: {e}\n")
        return 1
    sys.stdout.write(text)
    print(f"wrote {os.path.join(args.out, args.prefix)}.md, "
          f"{args.prefix}-accuracy.png and {args.prefix}-bytes.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
