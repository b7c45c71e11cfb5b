#!/usr/bin/python3
"""A transformer at GPT-2 small's size (byte-level, 14 blocks of width 864:
126M parameters) trained from the user's path: the DDP script
(examples/python/gpt/original.py) against its gradwire port (train.py under
`gradwire run -n W --shards S`, DistributedOptimizer with its defaults),
one after the other in the same sitting.

    bench/large/large.py --steps=20
    bench/large/large.py --report=docs/benchmarks/data/large-DATE.json

For each run it prints and keeps:
  - seconds per step, and for gradwire the part spent in the exchange
    (DistributedOptimizer.exchange_seconds, GRADWIRE_STATS_JSON) against
    the rest (data, forward, backward, the local optimizer);
  - start-up: seconds from DistributedOptimizer's construction to its
    first step, and bytes sent and received (the Init exchange);
  - bytes pushed and pulled per worker per step;
  - each worker's peak resident memory (ru_maxrss) against DDP's, rank for
    rank, in MB and in bytes per parameter;
  - each shard's peak resident memory (its process' VmHWM, read every half
    second while it runs) in bytes per parameter it owns, and its CPU
    seconds per step (on one host the shards take the workers' cores), the size of its checkpoint and the seconds the
    checkpoints took to write (gradwire_shard_checkpoint_seconds);
  - the held-out perplexity after the steps.
--python-path runs gradwire's port against another build of the package
(e.g. an older one, for a before/after of the worker's memory) under the
name given by --label.

The JSON (each run with its sitting's commit, machine and command) is
written after each run. Exit codes: 0; 1 when a run fails (the end of its
log is printed); 2 for a bad command line.
"""

import argparse
import datetime
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "models"))
from models import free_port, provenance  # noqa: E402

PYTHON = "/usr/bin/python3"
GPT = os.path.join(ROOT, "examples", "python", "gpt")
MODEL_FLAGS = ["--n-layer=14", "--d-model=864", "--n-head=12"]
METRICS_URL = re.compile(r"shard (\d+) serving on \S+, metrics at (\S+)")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4, help="per rank")
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--model", default=" ".join(MODEL_FLAGS),
                   help="the script's model flags")
    p.add_argument("--methods", default="ddp,gradwire")
    p.add_argument("--checkpoint-every", type=int, default=10,
                   help="shard checkpoints every this many updates")
    p.add_argument("--python-path", default="",
                   help="gradwire's Python package to run (default: the "
                        "build's)")
    p.add_argument("--label", default="gradwire")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default="")
    p.add_argument("--append", action="store_true")
    p.add_argument("--report", default="",
                   help="print the table of this JSON file and exit")
    args = p.parse_args()
    if min(args.steps, args.workers, args.shards, args.batch_size) < 1:
        p.error("--steps, --workers, --shards and --batch-size must be >= 1")
    methods = args.methods.split(",")
    if not set(methods) <= {"ddp", "gradwire"}:
        p.error("--methods: ddp and gradwire only")
    args.methods = methods
    # The scripts run in their own folders: `make` passes a relative one.
    args.build = os.path.abspath(args.build)
    if not args.out:
        args.out = os.path.join(
            ROOT, "docs", "benchmarks", "data",
            f"large-{datetime.date.today().isoformat()}.json")
    return args


def script_flags(args, summary):
    return [f"--steps={args.steps}", f"--batch-size={args.batch_size}",
            f"--block-size={args.block_size}", "--eval-batches=4",
            f"--log-interval={max(1, args.steps // 4)}",
            f"--summary={summary}", *shlex.split(args.model)]


def run_ddp(args, run_dir, log):
    summary = os.path.join(run_dir, "summary-{rank}.json")
    environment = dict(os.environ, MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(free_port()),
                       WORLD_SIZE=str(args.workers),
                       OMP_NUM_THREADS=str(max(1, os.cpu_count()
                                               // args.workers)))
    processes = [subprocess.Popen(
        [PYTHON, "original.py", *script_flags(args, summary)], cwd=GPT,
        env=dict(environment, RANK=str(rank)), stdout=log,
        stderr=subprocess.STDOUT) for rank in range(args.workers)]
    code = max(p.wait() for p in processes)
    return code, {}


class ShardWatch:
    """Polls each shard while the job runs: its process' high-water mark of
    resident memory (VmHWM in /proc, found by the shard's checkpoint folder
    on its command line) and its /metrics' checkpoint figures."""

    def __init__(self, checkpoints):
        self.urls = {}
        self.peak_rss = {}
        self.cpu_seconds = {}
        self.checkpoints = {}
        self._folder = checkpoints
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _read_high_water_marks(self):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                command = open(f"/proc/{pid}/cmdline").read().split("\0")
                status = open(f"/proc/{pid}/status").read()
            except OSError:
                continue
            for word in command:
                found = re.match(re.escape(self._folder) + r"/shard-(\d+)$",
                                 word.split("=", 1)[-1])
                hwm = re.search(r"VmHWM:\s+(\d+) kB", status)
                if found and hwm and "gradwire-server" in command[0]:
                    shard = int(found.group(1))
                    self.peak_rss[shard] = max(self.peak_rss.get(shard, 0),
                                               int(hwm.group(1)) * 1024)
                    self.cpu_seconds[shard] = self._cpu(pid)

    def _cpu(self, pid):
        """User and system CPU seconds of process `pid` so far."""
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        # utime and stime are fields 14 and 15 of stat(5), 12 and 13 here.
        return (int(fields[11]) + int(fields[12])) / self._ticks

    def _poll(self):
        while not self._stop.wait(0.5):
            self._read_high_water_marks()
            for shard, url in list(self.urls.items()):
                try:
                    text = urllib.request.urlopen(url, timeout=2).read()
                except OSError:
                    continue
                self._read(shard, text.decode())

    def _read(self, shard, text):
        for line in text.splitlines():
            for field in ("sum", "count"):
                if line.startswith(f"gradwire_shard_checkpoint_seconds_{field}"):
                    self.checkpoints.setdefault(shard, {})[field] = float(
                        line.split()[-1])

    def stop(self):
        self._stop.set()
        self._thread.join()


def run_gradwire(args, run_dir, log):
    summary = os.path.join(run_dir, "summary-{rank}.json")
    checkpoints = os.path.join(run_dir, "checkpoints")
    environment = dict(os.environ, PYTHONPATH=args.python_path or os.path.join(
        args.build, "python"), GRADWIRE_STATS_JSON=os.path.join(
            run_dir, "stats-{rank}.json"))
    environment.pop("GRADWIRE_COMPRESSION", None)
    command = [os.path.join(args.build, "bin", "gradwire"), "run",
               "-n", str(args.workers), "--shards", str(args.shards),
               f"--checkpoint-dir={checkpoints}",
               f"--server-args=--checkpoint-every={args.checkpoint_every}",
               "--", PYTHON, "train.py", *script_flags(args, summary)]
    watch = ShardWatch(checkpoints)
    process = subprocess.Popen(command, cwd=GPT, env=environment,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        log.write(line.encode())
        found = METRICS_URL.search(line)
        if found:
            watch.urls[int(found.group(1))] = found.group(2)
    code = process.wait()
    watch.stop()
    shards = {}
    for shard in range(args.shards):
        files = glob.glob(os.path.join(checkpoints, f"shard-{shard}", "*"))
        written = watch.checkpoints.get(shard, {})
        shards[shard] = {
            "peak_rss_mb": watch.peak_rss.get(shard, 0) / 2**20,
            "checkpoint_bytes": max((os.path.getsize(f) for f in files
                                     if os.path.isfile(f)), default=0),
            "cpu_seconds": watch.cpu_seconds.get(shard, 0.0),
            "checkpoints_written": written.get("count", 0),
            "checkpoint_seconds": (written["sum"] / written["count"]
                                   if written.get("count") else None)}
    return code, {"shard_figures": shards}


def read_rank_files(run_dir, name, workers):
    found = []
    for rank in range(workers):
        path = os.path.join(run_dir, f"{name}-{rank}.json")
        found.append(json.load(open(path)) if os.path.exists(path) else {})
    return found


def one_run(method, args, runs_dir):
    name = args.label if method == "gradwire" else method
    run_dir = os.path.join(runs_dir, name)
    os.makedirs(run_dir, exist_ok=True)
    log_path = os.path.join(run_dir, "log.txt")
    started = time.monotonic()
    with open(log_path, "wb") as log:
        runner = run_ddp if method == "ddp" else run_gradwire
        code, extra = runner(args, run_dir, log)
    if code != 0:
        tail = open(log_path, "rb").read()[-3000:].decode(errors="replace")
        sys.exit(f"{name} failed with code {code}:\n{tail}")
    run = {"method": name, "workers": args.workers, "shards": args.shards,
           "steps": args.steps, "wall_seconds": time.monotonic() - started,
           "ranks": read_rank_files(run_dir, "summary", args.workers),
           "stats": read_rank_files(run_dir, "stats", args.workers)}
    run.update(extra)
    return run


def per_step_mb(run, field):
    stats = [s for s in run["stats"] if s]
    if not stats:
        return None
    return max(s[field] for s in stats) / run["steps"] / 1e6


def table(runs):
    ddp = next((r for r in runs if r["method"] == "ddp"), None)
    lines = ["| run | s/step | exchange s/step | start-up s | start-up MB "
             "sent/received | MB/step pushed/pulled | worker peak MB (B/param)"
             " | vs DDP | shard peak MB (B/param owned) | shard CPU s/step | "
             "checkpoint MB, s | perplexity |", "|---|" + "---:|" * 11]
    for run in runs:
        ranks = run["ranks"]
        parameters = ranks[0].get("parameters", 0)
        step = max(r.get("seconds_per_step", 0) for r in ranks)
        peak = max(r.get("peak_rss_mb", 0) for r in ranks)
        extra = ""
        if ddp is not None and run is not ddp:
            ratios = [r.get("peak_rss_mb", 0) / d.get("peak_rss_mb", 1)
                      for r, d in zip(ranks, ddp["ranks"])]
            extra = " / ".join(f"{x:.2f}x" for x in ratios)
        stats = [s for s in run["stats"] if s]
        exchange = (f"{max(s['exchange_seconds'] for s in stats) / run['steps']:.2f}"
                    if stats else "")
        startup = (f"{max(s['startup_seconds'] for s in stats):.1f}"
                   if stats else "")
        startup_mb = (f"{max(s['startup_bytes_sent'] for s in stats) / 1e6:.0f}"
                      f" / {max(s['startup_bytes_received'] for s in stats) / 1e6:.0f}"
                      if stats else "")
        traffic = (f"{per_step_mb(run, 'pushed_bytes'):.2f} / "
                   f"{per_step_mb(run, 'pulled_bytes'):.2f}" if stats else "")
        shards = run.get("shard_figures", {})
        owned = parameters / max(1, len(shards)) if shards else 0
        shard_peak = " / ".join(
            f"{s['peak_rss_mb']:.0f} ({s['peak_rss_mb'] * 2**20 / owned:.1f})"
            for s in shards.values()) if owned else ""
        shard_cpu = " / ".join(
            f"{s.get('cpu_seconds', 0) / run['steps']:.2f}"
            for s in shards.values())
        checkpoint = " / ".join(
            f"{s['checkpoint_bytes'] / 1e6:.0f}, "
            f"{s['checkpoint_seconds'] or 0:.2f}" for s in shards.values())
        perplexity = ranks[0].get("test_perplexity", float("nan"))
        lines.append(
            f"| {run['method']} | {step:.2f} | {exchange} | {startup} | "
            f"{startup_mb} | {traffic} | {peak:.0f} "
            f"({peak * 2**20 / max(1, parameters):.1f}) | {extra} | "
            f"{shard_peak} | {shard_cpu} | {checkpoint} | {perplexity:.2f} |")
    return "\n".join(lines)


def main():
    args = parse_args()
    if args.report:
        data = json.load(open(args.report))
        for sitting in data["sittings"]:
            print(f"{sitting['provenance']['date']} "
                  f"{sitting['provenance']['commit'][:10]}")
            print(table(sitting["runs"]))
        return
    data = {"sittings": []}
    if args.append and os.path.exists(args.out):
        data = json.load(open(args.out))
    sitting = {"provenance": provenance(sys.argv), "runs": []}
    data["sittings"].append(sitting)
    runs_dir = os.path.join(args.build, "large-runs",
                            datetime.datetime.now().strftime("%H%M%S"))
    for method in args.methods:
        sitting["runs"].append(one_run(method, args, runs_dir))
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as out:
            json.dump(data, out, indent=1)
        print(table(sitting["runs"]), flush=True)


if __name__ == "__main__":
    main()
