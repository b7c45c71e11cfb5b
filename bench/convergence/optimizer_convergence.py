#!/usr/bin/python3
"""Your own optimizer: gradwire.torch.DistributedOptimizer against DDP.

Trains the CNN on Fashion-MNIST with 2 workers, once through gradwire
(`gradwire local`, 2 shards, bench/python/worker.py --api=optimizer: a
local torch optimizer steps on the average of Top-K 1% + error feedback
pushes, exact pulls by default) and once with torch DDP over gloo (dense
fp32 all-reduce, worker.py --baseline=ddp), for each optimizer and seed,
one run after another. Both sides get the same optimizer and learning
rate, the same data split and batch order, the same seed and one torch
thread per worker; worker 0 measures the test accuracy.

Optimizers: momentum (SGD momentum 0.9, lr 0.05), adam (lr 0.001),
adadelta (lr 1.0).

Writes to DIR (default build/):
  optimizer-convergence.json  every run (accuracy, bytes, seconds) and the
                              rows and means of the table
  optimizer-convergence.md    one row per optimizer and seed: accuracy of
                              gradwire and of DDP, the difference in points,
                              pushed + pulled MB of both and the reduction;
                              then the mean per optimizer
  optimizer-convergence-runs/ each run's summary and log

Bytes are pushed + pulled, summed over both workers: gradwire's measured,
DDP's computed (the dense fp32 gradient each way per step).

Exit codes: 0; 1 when a run fails (the end of its log is printed) or a
binary is missing; 2 for a bad command line.
"""

import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import time

PROG = "optimizer_convergence.py"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "bench", "python", "worker.py")

# name -> (title, worker.py flags). Each optimizer's settings are spelled
# out, so that a change of worker.py's defaults does not change the rows.
OPTIMIZERS = {
    "momentum": ("SGD momentum 0.9, lr 0.05",
                 ["--optimizer=momentum", "--momentum=0.9", "--lr=0.05"]),
    "adam": ("Adam, lr 0.001",
             ["--optimizer=adam", "--momentum=0.9", "--lr=0.001"]),
    "adadelta": ("Adadelta, lr 1.0", ["--optimizer=adadelta", "--lr=1.0"]),
}
WORKERS = 2
SHARDS = 2
# Both sides: the same model, batch and threads (1 per worker: 2 workers on
# 2 cores), no progress output in the logs.
COMMON = ["--model=cnn", "--batch-size=64", "--threads=1", "--progress=none"]
# gradwire's side only: pulls stay DistributedOptimizer's default.
GRADWIRE = ["--api=optimizer", "--compressor=topk", "--ratio=0.01",
            "--error-feedback"]
TOLERANCE_POINTS = 0.5


def _seeds(text):
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        seeds = []
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a comma-separated list of distinct seeds >= 0")
    return seeds


def _optimizers(text):
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in OPTIMIZERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"'{text}': known optimizers are {', '.join(OPTIMIZERS)}")
    return [n for n in OPTIMIZERS if n in names]  # Table order.


def _positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    return int(text)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=_seeds, default=[1, 2, 3],
                   help="comma-separated seeds (default 1,2,3)")
    p.add_argument("--optimizers", type=_optimizers,
                   default=list(OPTIMIZERS), metavar="OPT,OPT",
                   help="of " + ", ".join(OPTIMIZERS) + " (default: all)")
    p.add_argument("--epochs", type=_positive, default=1,
                   help="CNN epochs per run (default 1)")
    p.add_argument("--out", default="build", metavar="DIR",
                   help="where results go (default build)")
    p.add_argument("--bin", default=os.path.join("build", "bin"),
                   metavar="DIR",
                   help="where gradwire is (default build/bin); the Python "
                   "package is taken from DIR/../python")
    p.add_argument("--exchange", choices=["auto", "gradients", "updates"],
                   default="auto",
                   help="what DistributedOptimizer exchanges (worker.py "
                   "--exchange; default auto: updates for Adam and "
                   "Adadelta, gradients for SGD)")
    p.add_argument("--ddp-from", metavar="JSON",
                   help="take DDP's side of each (optimizer, seed) from an "
                   "earlier optimizer-convergence.json instead of training "
                   "it again (the same data, seeds and settings)")
    p.add_argument("gradwire_flags", nargs="*", metavar="-- FLAG",
                   help="more worker.py flags for gradwire's side, after "
                   "-- (e.g. -- --pull=delta)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the runs' command lines and exit")
    return p.parse_args(argv)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan(args, optimizer, seed):
    """(path prefix of its files, gradwire's command, DDP's two commands)
    of one (optimizer, seed)."""
    runs = os.path.join(args.out, "optimizer-convergence-runs")
    base = os.path.join(runs, f"{optimizer}-s{seed}")
    flags = COMMON + [f"--epochs={args.epochs}", f"--seed={seed}"] \
        + OPTIMIZERS[optimizer][1]
    gradwire = [os.path.join(args.bin, "gradwire"), "local",
                f"--shards={SHARDS}", f"--workers={WORKERS}",
                f"--worker-command={sys.executable} {TRAIN}",
                *flags, *GRADWIRE, f"--exchange={args.exchange}",
                *args.gradwire_flags,
                f"--summary-json={base}-gradwire.json"]
    master = f"--ddp-master=127.0.0.1:{free_port()}"
    ddp = [[sys.executable, TRAIN, "--baseline=ddp", master,
            f"--worker-id={w}", f"--num-workers={WORKERS}",
            f"--evaluate={'true' if w == 0 else 'false'}", *flags,
            f"--summary-json={base}-ddp-w{w}.json"] for w in range(WORKERS)]
    return base, gradwire, ddp


def summary_path(command):
    return command[-1].partition("=")[2]


def fail(label, log):
    with open(log, errors="replace") as f:
        tail = "".join(f.readlines()[-20:])
    sys.stderr.write(f"{PROG}: {label} failed; the end of {log}:\n{tail}")
    sys.exit(1)


def run_processes(label, commands, logs, env):
    """Runs COMMANDS at once, each logging to its LOGS entry; exits 1 with
    the end of the log of the first that fails, after stopping the others
    (a DDP peer would wait for the failed one until its deadline)."""
    files = [open(log, "w") for log in logs]
    procs = [subprocess.Popen(c, stdout=f, stderr=subprocess.STDOUT, env=env)
             for c, f in zip(commands, files)]
    failed = None
    while failed is None and any(p.poll() is None for p in procs):
        time.sleep(1)
        failed = next((i for i, p in enumerate(procs)
                       if p.poll() not in (None, 0)), None)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    for f in files:
        f.close()
    if failed is None:  # One may have failed in the last second.
        failed = next((i for i, p in enumerate(procs) if p.returncode), None)
    if failed is not None:
        fail(label, logs[failed])


def load(path):
    with open(path) as f:
        return json.load(f)


def train_ddp(base, ddp, label, env):
    """DDP's accuracy, bytes and seconds of one (optimizer, seed)."""
    start = time.monotonic()
    run_processes(label, ddp, [f"{base}-ddp-w{w}.log"
                               for w in range(WORKERS)], env)
    theirs = [load(summary_path(c)) for c in ddp]
    return {"ddp_accuracy": theirs[0]["test_accuracy"],
            "ddp_bytes": sum(s["pushed_bytes"] + s["pulled_bytes"]
                             for s in theirs),
            "ddp_seconds": round(time.monotonic() - start, 1)}


def earlier_ddp(args, optimizer, seed):
    """DDP's side of (optimizer, seed) from --ddp-from; None without it."""
    if not args.ddp_from:
        return None
    for row in load(args.ddp_from)["rows"]:
        if (row["optimizer"], row["seed"]) == (optimizer, seed):
            return {k: row[k] for k in ("ddp_accuracy", "ddp_bytes",
                                        "ddp_seconds")}
    sys.stderr.write(f"{PROG}: {args.ddp_from} has no DDP run of {optimizer} "
                     f"seed {seed}\n")
    sys.exit(1)


def measure(args, optimizer, seed, env):
    """Trains one (optimizer, seed) on both sides; its row."""
    base, gradwire, ddp = plan(args, optimizer, seed)
    start = time.monotonic()
    run_processes(f"gradwire {optimizer} seed {seed}", [gradwire],
                  [base + "-gradwire.log"], env)
    middle = time.monotonic()
    theirs = earlier_ddp(args, optimizer, seed) or train_ddp(
        base, ddp, f"DDP {optimizer} seed {seed}", env)
    ours = load(summary_path(gradwire))
    row = {
        "optimizer": optimizer, "seed": seed,
        "gradwire_accuracy": ours["test_accuracy"],
        "gradwire_bytes": ours["pushed_bytes"] + ours["pulled_bytes"],
        "gradwire_seconds": round(middle - start, 1),
        "steps": ours["steps"],
        "commands": {"gradwire": shlex.join(gradwire),
                     "ddp": [shlex.join(c) for c in ddp]},
        **theirs,
    }
    row["difference_points"] = round(
        100 * (row["gradwire_accuracy"] - row["ddp_accuracy"]), 4)
    return row


def means(rows, optimizers):
    keys = ("gradwire_accuracy", "ddp_accuracy", "difference_points",
            "gradwire_bytes", "ddp_bytes")
    return [dict(optimizer=name, **{
        k: statistics.fmean(r[k] for r in rows if r["optimizer"] == name)
        for k in keys}) for name in optimizers]


def table_line(name, seed, r):
    return (f"| {name} | {seed} | {100 * r['gradwire_accuracy']:.2f} | "
            f"{100 * r['ddp_accuracy']:.2f} | {r['difference_points']:+.2f} "
            f"| {r['gradwire_bytes'] / 1e6:.1f} | {r['ddp_bytes'] / 1e6:.1f} "
            f"| {r['ddp_bytes'] / r['gradwire_bytes']:.1f}x |")


def markdown(command, args, rows, averages, seconds):
    head = ("| optimizer | seed | gradwire % | DDP % | difference (points) | "
            "gradwire MB | DDP MB (dense) | fewer bytes |\n"
            "|---|---|---|---|---|---|---|---|")
    within = all(abs(r["difference_points"]) <= TOLERANCE_POINTS
                 for r in rows)
    lines = [
        f"CNN, {args.epochs} epoch(s), {WORKERS} workers; gradwire: "
        f"{SHARDS} shards, {' '.join(GRADWIRE)} --exchange={args.exchange} "
        f"{' '.join(args.gradwire_flags)}, "
        "DistributedOptimizer's default pulls; DDP: gloo, dense fp32. Test accuracy of worker 0; "
        "MB pushed + pulled by both workers (DDP's computed: the dense fp32 "
        f"gradient each way per step). {seconds / 60:.0f} minutes in all.",
        "", f"    {command}", "", head]
    lines += [table_line(OPTIMIZERS[r["optimizer"]][0], r["seed"], r)
              for r in rows]
    lines += ["", "Mean over the seeds:", "", head]
    lines += [table_line(OPTIMIZERS[m["optimizer"]][0], "mean", m)
              for m in averages]
    lines += ["", f"Every row within {TOLERANCE_POINTS} point of DDP: "
              f"{'yes' if within else 'no'}."]
    return "\n".join(lines) + "\n", within


def main(argv):
    args = parse_args(argv)
    command = shlex.join([sys.argv[0]] + argv)
    pairs = [(o, s) for o in args.optimizers for s in args.seeds]
    if args.dry_run:
        for optimizer, seed in pairs:
            _, gradwire, ddp = plan(args, optimizer, seed)
            print(shlex.join(gradwire))
            for c in ddp:
                print(shlex.join(c) + " &")
        print(f"{len(pairs)} gradwire and {len(pairs)} DDP runs; results "
              f"in {args.out}/optimizer-convergence.*")
        return 0
    cli = os.path.join(args.bin, "gradwire")
    if not os.access(cli, os.X_OK):
        sys.stderr.write(f"{PROG}: {cli} is missing (make build, or --bin)\n")
        return 1
    python = os.path.abspath(os.path.join(args.bin, os.pardir, "python"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (python, os.environ.get("PYTHONPATH")) if p))
    os.makedirs(os.path.join(args.out, "optimizer-convergence-runs"),
                exist_ok=True)
    start = time.monotonic()
    rows = []
    for i, (optimizer, seed) in enumerate(pairs, 1):
        r = measure(args, optimizer, seed, env)
        rows.append(r)
        print(f"[{i}/{len(pairs)}] {optimizer} seed {seed}: gradwire "
              f"{100 * r['gradwire_accuracy']:.2f}% ({r['gradwire_seconds']} "
              f"s), DDP {100 * r['ddp_accuracy']:.2f}% ({r['ddp_seconds']} "
              f"s), {r['difference_points']:+.2f} points", flush=True)
    seconds = time.monotonic() - start
    averages = means(rows, args.optimizers)
    text, within = markdown(command, args, rows, averages, seconds)
    result = {"command": command, "epochs": args.epochs, "seeds": args.seeds,
              "workers": WORKERS, "shards": SHARDS,
              "optimizers": {n: OPTIMIZERS[n][1] for n in args.optimizers},
              "common_flags": COMMON,
              "gradwire_flags": GRADWIRE + [f"--exchange={args.exchange}"]
              + args.gradwire_flags,
              "ddp_bytes": "computed: the dense fp32 gradient each way",
              "seconds": round(seconds, 1),
              f"within_{TOLERANCE_POINTS}_points": within,
              "rows": rows, "means": averages}
    with open(os.path.join(args.out, "optimizer-convergence.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, "optimizer-convergence.md"), "w") as f:
        f.write(text)
    print("\n" + text + f"wrote {args.out}/optimizer-convergence.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
