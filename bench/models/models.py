#!/usr/bin/python3
"""The real models from the user's path: ResNet-18 and the GPT-style
transformer of examples/python/, each trained by its DDP script
(original.py, dense fp32 all-reduce over gloo) and by its gradwire port
(train.py under `gradwire run`, DistributedOptimizer with its defaults),
with the same data split and seeds, one run after another.

    bench/models/models.py --models=resnet,gpt --plan=2:1,2,3/4:1
    bench/models/models.py --report=docs/benchmarks/data/models-DATE.json

Methods (--methods, comma-separated): ddp; gradwire (the defaults);
none (gradwire with Compression("none"), lossless). --method NAME=SPEC,
repeated, adds gradwire with GRADWIRE_COMPRESSION=SPEC under that name
(e.g. --method topk5=topk,ratio=0.05); ";exchange=gradients" (or
preconditioned, updates) after the SPEC, or alone, sets GRADWIRE_EXCHANGE,
and ";freeze_step=N" GRADWIRE_FREEZE_STEP. A SPEC "ddp:HOOK" runs the DDP
script with one of PyTorch's DDP communication hooks instead
(bench/models/ddp_hooked.py): --method ddp-psgd4=ddp:powersgd,rank=4 or
--method ddp-fp16=ddp:fp16. Their bytes are computed from the hook's
element counts where it reports them (PowerSGD), else as DDP's at the
hook's precision. A SPEC "hook:COMPRESSION" runs the DDP script with
gradwire's own hook (gradwire.torch.ddp_comm_hook, the DDP user's path)
under `gradwire run`, GRADWIRE_COMPRESSION=COMPRESSION (the hook's
defaults where empty): --method hook=hook: or --method
hook-topk=hook:topk,ratio=0.01.

Prints one table: model, workers, seed, method, the final test accuracy
(ResNet-18) or held-out perplexity (GPT), its difference to DDP in the
same row group, bytes both ways per worker per step against DDP's, seconds
per step, and each run's peak resident memory (the larger rank) against
DDP's. gradwire's bytes are what the shards counted (pushes in, pulls out,
start-up excluded); DDP's are computed: a ring all-reduce moves 2 (W-1)/W
of the fp32 gradient each way per worker per step.

--rss-parts runs each script under bench/models/rss_parts.py and adds a
table of each rank's peak memory split into data (heap and anonymous
memory) and mapped libraries, medians over the runs (repeat a seed in
--plan, e.g. 2:1,1,1, for repeats).

Writes the JSON (every run, with the commit, the machine and the command)
after each run, so an interrupted sitting keeps what it measured.

Exit codes: 0; 1 when a run fails (the end of its log is printed); 2 for a
bad command line.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
import time

from report import tables  # bench/models/report.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3"
SCRIPTS = {"resnet": os.path.join(ROOT, "examples", "python", "resnet"),
           "gpt": os.path.join(ROOT, "examples", "python", "gpt")}
METRIC = {"resnet": "test_accuracy", "gpt": "test_perplexity"}
SHARDS = 2
UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="resnet,gpt")
    p.add_argument("--plan", default="2:1,2,3/4:1",
                   help="WORKERS:SEED,SEED,... groups joined by '/' "
                   "(default: 2 workers on seeds 1-3, 4 workers on seed 1)")
    p.add_argument("--methods", default="ddp,gradwire")
    p.add_argument("--method", action="append", default=[],
                   metavar="NAME=SPEC",
                   help="also gradwire with GRADWIRE_COMPRESSION=SPEC "
                   "(';exchange=WHAT' sets GRADWIRE_EXCHANGE, "
                   "';freeze_step=N' GRADWIRE_FREEZE_STEP)")
    p.add_argument("--resnet-steps", type=int, default=300)
    p.add_argument("--gpt-steps", type=int, default=200)
    p.add_argument("--test-limit", type=int, default=2000,
                   help="ResNet-18: test examples (the first N)")
    p.add_argument("--extra", default="",
                   help="more flags for both scripts of every model")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rss-parts", action="store_true",
                   help="run each script under rss_parts.py and keep, per "
                   "rank, its peak resident memory split by what it maps")
    p.add_argument("--out", default="")
    p.add_argument("--append", action="store_true",
                   help="add the runs to those already in --out (each run "
                   "keeps the provenance of its own sitting)")
    p.add_argument("--report", default="",
                   help="only print the table of this JSON file")
    args = p.parse_args()
    for name in args.models.split(","):
        if name not in SCRIPTS:
            p.error(f"--models: unknown model '{name}' (resnet, gpt)")
    try:
        args.groups = [(int(workers), [int(s) for s in seeds.split(",")])
                       for workers, seeds in (group.split(":")
                                              for group in
                                              args.plan.split("/"))]
    except ValueError:
        p.error(f"--plan: '{args.plan}' is not WORKERS:SEED,SEED/...")
    if min(workers for workers, _ in args.groups) < 1:
        p.error("--plan: worker counts must be at least 1")
    args.method_specs = {}
    for name in filter(None, args.methods.split(",")):
        if name not in ("ddp", "gradwire", "none"):
            p.error(f"--methods: '{name}' is not ddp, gradwire or none "
                    "(--method NAME=SPEC for others)")
        args.method_specs[name] = "none" if name == "none" else ""
    for item in args.method:
        name, _, spec = item.partition("=")
        if not name or not spec:
            p.error(f"--method: '{item}' is not NAME=SPEC")
        args.method_specs[name] = spec
    # The scripts run in their own folders: `make` passes a relative one.
    args.build = os.path.abspath(args.build)
    if not args.out:
        args.out = os.path.join(
            ROOT, "docs", "benchmarks", "data",
            f"models-{datetime.date.today().isoformat()}.json")
    return args


def provenance(argv):
    def git(*cmd):
        return subprocess.run(["git", "-C", ROOT, *cmd], capture_output=True,
                              text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip()
                for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    memory = next(int(line.split()[1]) // 1024
                  for line in open("/proc/meminfo")
                  if line.startswith("MemTotal"))
    return {"commit": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": {"cpu": cpu, "cores": os.cpu_count(),
                        "memory_mb": memory,
                        "load_at_start": os.getloadavg()[0]},
            "command": " ".join(shlex.quote(a) for a in argv)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def script_flags(model, seed, args, summary):
    steps = args.resnet_steps if model == "resnet" else args.gpt_steps
    flags = [f"--steps={steps}", f"--seed={seed}", f"--summary={summary}"]
    if model == "resnet":
        flags.append(f"--test-limit={args.test_limit}")
    return flags + shlex.split(args.extra)


HOOKED = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "ddp_hooked.py")
RSS_PARTS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "rss_parts.py")


def run_ddp(model, workers, flags, log, hook=None, wrap=()):
    environment = dict(os.environ, MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(free_port()),
                       WORLD_SIZE=str(workers),
                       OMP_NUM_THREADS=str(max(1, os.cpu_count() // workers)))
    script = [*wrap, *(["original.py"] if hook is None else [
        HOOKED, f"--hook={hook}", "original.py"])]
    processes = [subprocess.Popen(
        [PYTHON, *script, *flags], cwd=SCRIPTS[model],
        env=dict(environment, RANK=str(rank)), stdout=log,
        stderr=subprocess.STDOUT) for rank in range(workers)]
    return max(p.wait() for p in processes), ""


# The environment variables a SPEC's ";key=value" parts set.
SPEC_VARIABLES = {"exchange": "GRADWIRE_EXCHANGE",
                  "freeze_step": "GRADWIRE_FREEZE_STEP"}


def split_spec(spec):
    """(compression, {variable: value}) of a method's SPEC: "COMPRESSION",
    then ";exchange=WHAT" and ";freeze_step=N" (each may be left out)."""
    compression, variables = [], {}
    for part in filter(None, spec.split(";")):
        key, _, value = part.partition("=")
        if key in SPEC_VARIABLES:
            variables[SPEC_VARIABLES[key]] = value
        else:
            compression.append(part)
    return ",".join(compression), variables


def run_gradwire(model, workers, flags, spec, log, build, hook=False,
                 wrap=()):
    environment = dict(os.environ,
                       PYTHONPATH=os.path.join(build, "python"))
    for variable in ("GRADWIRE_COMPRESSION", *SPEC_VARIABLES.values()):
        environment.pop(variable, None)
    compression, variables = split_spec(spec)
    if compression:
        environment["GRADWIRE_COMPRESSION"] = compression
    environment.update(variables)
    result = subprocess.run(
        [os.path.join(build, "bin", "gradwire"), "run", "-n", str(workers),
         "--shards", str(SHARDS), "--", PYTHON, *wrap,
         *([HOOKED, "--hook=gradwire", "original.py"] if hook
           else ["train.py"]), *flags],
        cwd=SCRIPTS[model], env=environment, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    log.write(result.stdout.encode())
    return result.returncode, result.stdout


def shard_bytes(output):
    """(pushed, pulled) bytes from gradwire run's summary of the shards'
    counters."""
    found = {}
    for key in ("pushed", "pulled"):
        match = re.search(rf"^\s+{key}\s+([\d.]+) (B|kB|MB|GB|TB)", output,
                          re.MULTILINE)
        if match:
            found[key] = float(match.group(1)) * UNITS[match.group(2)]
    return found.get("pushed"), found.get("pulled")


def one_run(model, workers, seed, method, spec, args, runs_dir):
    tag = f"{model}-w{workers}-s{seed}-{method}"
    summary = os.path.join(runs_dir, tag + "-rank{rank}.json")
    flags = script_flags(model, seed, args, summary)
    parts = os.path.join(runs_dir, tag + "-parts-{rank}.json")
    wrap = [RSS_PARTS, f"--out={parts}"] if args.rss_parts else []
    start = time.time()
    with open(os.path.join(runs_dir, tag + ".log"), "wb") as log:
        if method == "ddp":
            code, output = run_ddp(model, workers, flags, log, wrap=wrap)
        elif spec.startswith("hook:"):
            code, output = run_gradwire(model, workers, flags,
                                        spec[len("hook:"):], log,
                                        args.build, hook=True, wrap=wrap)
        elif spec.startswith("ddp:"):
            code, output = run_ddp(model, workers, flags, log,
                                   hook=spec[len("ddp:"):], wrap=wrap)
        else:
            code, output = run_gradwire(model, workers, flags, spec, log,
                                        args.build, wrap=wrap)
    if code != 0:
        with open(os.path.join(runs_dir, tag + ".log"), "rb") as log:
            sys.stderr.write(log.read()[-3000:].decode(errors="replace"))
        raise SystemExit(f"models.py: run {tag} failed (exit {code})")
    ranks = []
    for rank in range(workers):
        with open(summary.format(rank=rank)) as f:
            ranks.append(json.load(f))
        if args.rss_parts:
            with open(parts.format(rank=rank)) as f:
                ranks[-1]["rss_parts"] = json.load(f)
    run = {"model": model, "workers": workers, "seed": seed,
           "method": method, "compression": spec, "flags": flags,
           "wall_seconds": time.time() - start,
           "metric": ranks[0][METRIC[model]],
           "steps": ranks[0]["steps"],
           "seconds_per_step": max(r["seconds_per_step"] for r in ranks),
           "peak_rss_mb": max(r["peak_rss_mb"] for r in ranks),
           "ranks_agree": len({r["weights_sum"] for r in ranks}) == 1,
           "ranks": ranks}
    if not run["ranks_agree"]:
        sys.stderr.write(f"models.py: run {tag}: the ranks ended with "
                         "different weights; its figure is not a result\n")
    run["parameters"] = ranks[0]["parameters"]
    hook = ranks[0].get("ddp_hook")
    if hook is not None and "allreduced_bytes_per_step" in hook:
        # A ring all-reduce sends and receives 2 (W-1)/W of it each way.
        run["bytes_per_worker_step"] = 2 * 2 * (workers - 1) / workers * \
            hook["allreduced_bytes_per_step"]
    elif method != "ddp":
        pushed, pulled = shard_bytes(output)
        if pushed is not None and pulled is not None:
            run["bytes_per_worker_step"] = (pushed + pulled) / (
                workers * run["steps"])
    return run


def main():
    args = parse_args()
    if args.report:
        with open(args.report) as f:
            runs = json.load(f)["runs"]
        print(tables(runs))
        return
    runs_dir = os.path.join(args.build, "models-runs")
    os.makedirs(runs_dir, exist_ok=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    document = dict(provenance(sys.argv), runs=[])
    if args.append and os.path.exists(args.out):
        with open(args.out) as f:
            document["runs"] = json.load(f)["runs"]
    for model in args.models.split(","):
        for workers, seeds in args.groups:
            for seed in seeds:
                for method, spec in args.method_specs.items():
                    run = one_run(model, workers, seed, method, spec, args,
                                  runs_dir)
                    run["sitting"] = {k: document[k] for k in
                                      ("commit", "dirty", "date", "machine",
                                       "command")}
                    document["runs"].append(run)
                    with open(args.out, "w") as f:
                        json.dump(document, f, indent=1)
                    print(f"{model} w{workers} s{seed} {method}: "
                          f"{run['metric']:.4f} "
                          f"{run['seconds_per_step']:.2f} s/step",
                          flush=True)
    print(tables(document["runs"]))
    print(f"written: {os.path.relpath(args.out, ROOT)}")


if __name__ == "__main__":
    main()
