#!/usr/bin/python3
"""Convergence benchmark: what compression costs in accuracy.

  bench/convergence.py [--seeds=1,2,3] [--epochs=10] [--model=mlp|cnn]
                       [--workers=2] [--shards=2] [--only=ROW,ROW]
                       [--optimizers=momentum,sgd,adam] [--out=DIR]
                       [--bin=DIR]
                       [--resume] [--dry-run | --list] [-- worker flags...]
  bench/convergence.py --merge [--out=DIR] CONVERGENCE.json...

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
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "scripts"))
import gradwire_report as report  # noqa: E402

PROG = "convergence.py"

Setting = collections.namedtuple("Setting", "name title flags")

# The rows, in table order. The compressed rows keep error feedback (the
# worker's default, named here so that a change of default does not change
# the rows).
SETTINGS = [
    Setting("dense", "dense fp32", ["--compressor=none", "--value-type=fp32"]),
    Setting("fp16", "dense fp16", ["--compressor=fp16"]),
    Setting("topk1", "Top-K 1% + EF",
            ["--compressor=topk", "--ratio=0.01", "--error-feedback"]),
    Setting("dgc01", "Top-K 0.1% DGC + EF",
            ["--compressor=dgc", "--ratio=0.001", "--error-feedback"]),
    Setting("qsgd", "QSGD 256 levels + EF",
            ["--compressor=qsgd", "--levels=256", "--error-feedback"]),
    Setting("onebit", "1-bit sign + EF",
            ["--compressor=onebit", "--error-feedback"]),
]
BASELINE = "dense"

# The optimizers, in table order: the worker's default (no flags) and plain
# SGD. The MLP's SGD runs at momentum's long-run step, lr / (1 - momentum) =
# 0.05 / 0.1; on the CNN that step diverges even dense (docs/convergence.md),
# and 0.1 trains.
# Adam (only when asked for: --optimizers=adam) runs at its usual lr,
# placed by --momentum-placement=auto (1-bit Adam beside compressed pushes).
SGD_LR = {"mlp": 0.5, "cnn": 0.1}
ADAM_LR = 0.001
OPTIMIZERS = ("momentum", "sgd", "adam")
DEFAULT_OPTIMIZERS = ["momentum", "sgd"]


def optimizer_flags(optimizer, model):
    """The worker flags of OPTIMIZER on MODEL."""
    if optimizer == "momentum":
        return []
    if optimizer == "adam":
        return ["--optimizer=adam", f"--lr={ADAM_LR:g}"]
    return ["--optimizer=sgd", f"--lr={SGD_LR[model]:g}"]


def optimizers_text(model):
    """How the table's header names the optimizers on MODEL."""
    return ("momentum: the worker's default (momentum 0.9, lr 0.05, "
            "--momentum-placement=auto); sgd: "
            + " ".join(optimizer_flags("sgd", model)) + "; adam: "
            + " ".join(optimizer_flags("adam", model)))


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


def _run_record(run, summary, out_dir):
    keys = ("test_accuracy", "epoch_test_accuracy", "epoch_loss", "steps",
            "wall_seconds", "pushed_bytes", "pulled_bytes",
            "dense_equivalent_bytes", "compression_ratio", "final_loss",
            "weights_fingerprint")
    record = {
        "row": run.setting.name,
        "setting": run.setting.title,
        "optimizer": run.optimizer,
        "seed": run.seed,
        "flags": run.command[2:],
        "summary": os.path.relpath(run.summary, out_dir),
        "log": os.path.relpath(run.log, out_dir),
    }
    record.update({k: summary[k] for k in keys if k in summary})
    return record


def write_results(args, runs, summaries):
    report_runs = [
        report.Run(label=run.setting.name, title=run.setting.title,
                   group=run.optimizer, summary=summary, path=run.summary)
        for run, summary in zip(runs, summaries)
    ]
    seeds = ",".join(str(s) for s in args.seeds)
    header = (f"{args.model}, {args.epochs} epoch(s), {args.workers} workers, "
              f"{args.shards} shards, seeds {seeds}, delta pulls; "
              + optimizers_text(args.model)
              + (f"; worker flags: {shlex.join(args.extra)}"
                 if args.extra else "") + ".")
    meta = {"model": args.model, "epochs": args.epochs,
            "workers": args.workers, "shards": args.shards,
            "seeds": args.seeds, "worker_flags": args.extra}
    records = [_run_record(run, summary, args.out)
               for run, summary in zip(runs, summaries)]
    return _write_outputs(args.out, header, meta, report_runs, records)


def _write_outputs(out, header, meta, report_runs, records):
    """convergence.md, .json and the two plots in OUT; returns the table."""
    rows = report.make_rows(report_runs, BASELINE)
    text = report.write_report(rows, out, "convergence",
                               baseline_title="dense fp32",
                               group_name="optimizer", header=[header, ""])
    result = dict(meta)
    result.update({
        "accuracy_spread": "half range: (max - min) / 2 over the seeds",
        "baseline": BASELINE,
        "runs": records,
        "rows": [dict(row.as_dict(), row=row.label, setting=row.title,
                      optimizer=row.group) for row in rows],
    })
    for row in result["rows"]:
        del row["label"], row["title"], row["group"]
    with open(os.path.join(out, "convergence.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    return text


# What --merge needs of each file, and what its files must agree on.
_MERGE_AGREE = ("model", "epochs", "workers", "shards")
_RUN_KEYS = ("row", "optimizer", "seed", "test_accuracy", "pushed_bytes",
             "pulled_bytes")


def _read_merge_file(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise report.ReportError(f"{path}: {e}")
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise report.ReportError(f"{path}: not a convergence.json (no runs)")
    for key in _MERGE_AGREE:
        if key not in data:
            raise report.ReportError(f"{path}: has no {key}")
    for i, run in enumerate(data["runs"]):
        missing = [k for k in _RUN_KEYS if k not in run]
        if missing:
            raise report.ReportError(
                f"{path}: run {i} has no {', '.join(missing)}")
    return data


def merge(args):
    """--merge: one result from the runs of earlier convergence.json files."""
    files = [(path, _read_merge_file(path)) for path in args.merge]
    first_path, first = files[0]
    for path, data in files[1:]:
        for key in _MERGE_AGREE:
            if data[key] != first[key]:
                raise report.ReportError(
                    f"{path}: {key} {data[key]!r} differs from {first_path}'s "
                    f"{first[key]!r}")
    titles = {s.name: s.title for s in SETTINGS}
    chosen = {}
    for path, data in files:
        for run in data["runs"]:
            key = (run["row"], run["optimizer"], run["seed"])
            if key in chosen:
                sys.stderr.write(
                    f"{PROG}: {key[0]} {key[1]} seed {key[2]}: taken from "
                    f"{path}, not {chosen[key][0]}\n")
            record = dict(run, merged_from=path)
            chosen[key] = (path, record)
    row_order = [s.name for s in SETTINGS]
    def order(key):
        row, optimizer, seed = key
        return (list(OPTIMIZERS).index(optimizer)
                if optimizer in OPTIMIZERS else len(OPTIMIZERS),
                row_order.index(row) if row in row_order else len(row_order),
                row, seed)
    keys = sorted(chosen, key=order)
    records = [chosen[k][1] for k in keys]
    report_runs = [
        report.Run(label=r["row"], title=r.get("setting") or
                   titles.get(r["row"], r["row"]), group=r["optimizer"],
                   summary=r, path=chosen[k][0])
        for k, r in zip(keys, records)
    ]
    seeds = sorted({r["seed"] for r in records})
    sources = "; ".join(
        f"{os.path.basename(path)}"
        + (f" (worker flags: {shlex.join(data.get('worker_flags') or [])})"
           if data.get("worker_flags") else "")
        for path, data in files)
    header = (f"{first['model']}, {first['epochs']} epoch(s), "
              f"{first['workers']} workers, {first['shards']} shards, seeds "
              f"{','.join(map(str, seeds))}, delta pulls; {optimizers_text(first['model'])}; "
              f"merged from {sources}.")
    meta = {key: first[key] for key in _MERGE_AGREE}
    meta.update({"seeds": seeds, "merged_from": [p for p, _ in files]})
    os.makedirs(args.out, exist_ok=True)
    return _write_outputs(args.out, header, meta, report_runs, records)


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
