"""The results of the convergence benchmark
(bench/convergence/convergence.py): convergence.md, convergence.json and
the two plots, from the runs just made or (--merge) from earlier
convergence.json files. gradwire_report comes from scripts/, which
convergence.py puts on the path."""

import json
import os
import shlex
import sys

import gradwire_report as report
from convergence_settings import (BASELINE, OPTIMIZERS, PROG, SETTINGS,
                                  optimizers_text)


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
