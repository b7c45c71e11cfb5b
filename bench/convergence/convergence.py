#!/usr/bin/python3
"""Convergence benchmark: what compression costs in accuracy.

  bench/convergence/convergence.py [--seeds=1,2,3] [--epochs=10]
      [--model=mlp|cnn] [--workers=2] [--shards=2] [--only=ROW,ROW]
      [--optimizers=momentum,sgd,adam] [--out=DIR] [--bin=DIR]
      [--resume] [--dry-run | --list] [-- worker flags...]
  bench/convergence/convergence.py --merge [--out=DIR] CONVERGENCE.json...

Trains the same model on the same data under each compression setting
(ROW), once with the worker's default optimizer (momentum 0.9 at lr 0.05;
--momentum-placement=auto decides where the momentum runs) and once with
plain SGD (lr 0.5 on the MLP, momentum's long-run step; lr 0.1 on the CNN,
where 0.5 diverges even dense), each with every seed, through
`gradwire local` (real shard and worker processes on loopback), one run
after another. Pulls are the default delta pulls in every row.

Writes to DIR (default build/):
  convergence.json          every run (row, optimizer, seed, accuracy, the
                            per-epoch arrays, bytes, wall time) and the rows
  convergence.md            one line per row and optimizer: final accuracy,
                            mean ± half the range over the seeds, points and
                            byte reductions against dense fp32 with the same
                            optimizer (scripts/gradwire_report.py's table)
  convergence-accuracy.png  test accuracy against epoch, a panel per optimizer
  convergence-bytes.png     final accuracy against bytes pushed + pulled
  convergence-runs/         each run's summary (ROW-OPTIMIZER-sSEED.json) and
                            log (.log); emptied first unless --resume

--resume keeps runs whose summary is there and whose command line (kept
in ROW-OPTIMIZER-sSEED.args) is the same. A failing run stops the benchmark
with the end of its log and exit code 1. --dry-run (or --list) prints the
runs' command lines and exits. Flags after -- go to every worker, last (so
they win). The binaries: --bin, else $BUILD/bin, else build/bin.
--merge trains nothing: it puts the runs of earlier convergence.json
files (seeds run at different times, rows added later) into one
convergence.json, table and pair of plots in DIR. The files must agree on
model, epochs, workers and shards; a run (row, optimizer, seed) given by
several files is taken from the last of them, and stderr says so. The
table's header names each file with its worker flags.

Exit codes: 0; 1 when a run fails, a binary or matplotlib is missing, or a
--merge file cannot be read or does not match; 2 for a bad command line.
"""

import argparse
import collections
import os
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "scripts"))
import gradwire_report as report  # noqa: E402
from convergence_results import merge, write_results  # noqa: E402
from convergence_settings import (  # noqa: E402
    DEFAULT_OPTIMIZERS, OPTIMIZERS, PROG, SETTINGS, optimizer_flags)


class _Parser(argparse.ArgumentParser):

    def error(self, message):
        sys.stderr.write(f"{PROG}: {message} (see {PROG} --help)\n")
        sys.exit(2)


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or str(value) != text.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    return value


def _seeds(text):
    seeds = []
    for part in text.split(","):
        if not part.strip().isdigit():
            raise argparse.ArgumentTypeError(
                f"'{text}' is not a comma-separated list of seeds (integers "
                ">= 0), e.g. 1,2,3")
        seeds.append(int(part))
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"'{text}' repeats a seed")
    return seeds


def _names(known, what):

    def parse(text):
        names = [n for n in text.split(",") if n]
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"'{text}': unknown {what} {', '.join(unknown)} (known: "
                f"{', '.join(known)})" if unknown else f"no {what} given")
        return [n for n in known if n in names]  # Table order.

    return parse


def parse_args(argv):
    """The options and the worker flags (everything after a bare --)."""
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    p = _Parser(prog=PROG, allow_abbrev=False, description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=_seeds, default=[1, 2, 3],
                   help="comma-separated seeds (default 1,2,3)")
    p.add_argument("--epochs", type=_positive, default=10)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--workers", type=_positive, default=2)
    p.add_argument("--shards", type=_positive, default=2)
    p.add_argument("--only", type=_names([s.name for s in SETTINGS], "row"),
                   default=[s.name for s in SETTINGS], metavar="ROW,ROW",
                   help="rows to run: " + ", ".join(s.name for s in SETTINGS))
    p.add_argument("--optimizers", type=_names(list(OPTIMIZERS), "optimizer"),
                   default=DEFAULT_OPTIMIZERS, metavar="OPT,OPT",
                   help="momentum (the worker's default), sgd (lr 0.5 on the "
                   "MLP, 0.1 on the CNN), adam (lr 0.001; not by default)")
    p.add_argument("--out", default="build", metavar="DIR")
    p.add_argument("--bin", metavar="DIR",
                   help="where gradwire is (default: $BUILD/bin, build/bin)")
    p.add_argument("--resume", action="store_true",
                   help="keep finished runs with the same command line")
    p.add_argument("--dry-run", "--list", dest="dry_run", action="store_true",
                   help="print the runs' command lines and exit")
    p.add_argument("--merge", nargs="+", metavar="JSON",
                   help="train nothing: merge these convergence.json files")
    args = p.parse_args(argv)
    args.extra = extra
    if args.bin is None:
        args.bin = os.path.join(os.environ.get("BUILD") or "build", "bin")
    return args


class Planned(collections.namedtuple("Planned",
                                     "setting optimizer seed command base")):
    """One run: its command line, and BASE, the path of its files without
    the extension."""

    @property
    def summary(self):
        return self.base + ".json"

    @property
    def log(self):
        return self.base + ".log"

    @property
    def args_file(self):
        return self.base + ".args"


def plan(args):
    cli = os.path.join(args.bin, "gradwire")
    runs_dir = os.path.join(args.out, "convergence-runs")
    runs = []
    for optimizer in args.optimizers:
        for setting in (s for s in SETTINGS if s.name in args.only):
            for seed in args.seeds:
                base = os.path.join(runs_dir,
                                    f"{setting.name}-{optimizer}-s{seed}")
                command = [
                    cli, "local", f"--shards={args.shards}",
                    f"--workers={args.workers}", f"--model={args.model}",
                    f"--epochs={args.epochs}", f"--seed={seed}",
                    "--progress=none", *setting.flags,
                    *optimizer_flags(optimizer, args.model),
                    f"--summary-json={base}.json",
                    *args.extra
                ]
                runs.append(Planned(setting, optimizer, seed, command, base))
    return runs


def _tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"(no log: {e.strerror})\n"


def _already_done(run):
    try:
        with open(run.args_file) as f:
            same = f.read() == shlex.join(run.command) + "\n"
        report.load_summary(run.summary)
        return same
    except (OSError, report.ReportError):
        return False


def execute(run, index, total):
    """Runs `run` (or keeps its earlier result with --resume); its summary.
    Exits 1 with the end of its log when it fails."""
    label = f"[{index}/{total}] {run.setting.name} {run.optimizer} " \
            f"seed {run.seed}"
    start = time.monotonic()
    with open(run.log, "w") as log:
        code = subprocess.call(run.command, stdout=log,
                               stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - start
    if code != 0:
        sys.stderr.write(f"{PROG}: {label} failed (exit code {code}); the "
                         f"end of {run.log}:\n{_tail(run.log)}")
        sys.exit(1)
    with open(run.args_file, "w") as f:
        f.write(shlex.join(run.command) + "\n")
    summary = _summary_or_exit(run)
    print(f"{label}: {_run_line(summary)} ({elapsed:.0f} s)", flush=True)
    return summary


def _summary_or_exit(run):
    try:
        return report.load_summary(run.summary)
    except report.ReportError as e:
        sys.stderr.write(f"{PROG}: {e}\n")
        sys.exit(1)


def _run_line(summary):
    accuracy = summary.get("test_accuracy")
    shown = "—" if accuracy is None else f"{accuracy:.4f}"
    return (f"accuracy {shown}, pushed {summary['pushed_bytes'] / 1e6:.1f} "
            f"MB, pulled {summary['pulled_bytes'] / 1e6:.1f} MB")



def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.merge:
        try:
            report.require_matplotlib()
            text = merge(args)
        except report.ReportError as e:
            sys.stderr.write(f"{PROG}: {e}\n")
            return 1
        print(text, end="")
        print(f"wrote {args.out}/convergence.md, convergence.json, "
              "convergence-accuracy.png and convergence-bytes.png")
        return 0
    runs = plan(args)
    if args.dry_run:
        for run in runs:
            print(shlex.join(run.command))
        print(f"{len(runs)} runs; results in {args.out}/convergence.*")
        return 0
    cli = runs[0].command[0]
    if not os.access(cli, os.X_OK):
        sys.stderr.write(f"{PROG}: {cli} is missing; run 'make build' first "
                         "(or give --bin)\n")
        return 1
    try:
        report.require_matplotlib()  # Before hours of training, not after.
    except report.ReportError as e:
        sys.stderr.write(f"{PROG}: {e}\n")
        return 1
    runs_dir = os.path.dirname(runs[0].base)
    if not args.resume:
        shutil.rmtree(runs_dir, ignore_errors=True)
    os.makedirs(runs_dir, exist_ok=True)
    summaries = []
    for i, run in enumerate(runs, 1):
        if args.resume and _already_done(run):
            summary = _summary_or_exit(run)
            print(f"[{i}/{len(runs)}] {run.setting.name} {run.optimizer} seed "
                  f"{run.seed}: kept, {_run_line(summary)}", flush=True)
        else:
            summary = execute(run, i, len(runs))
        summaries.append(summary)
    text = write_results(args, runs, summaries)
    print()
    print(text, end="")
    print(f"wrote {args.out}/convergence.md, convergence.json, "
          "convergence-accuracy.png and convergence-bytes.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
