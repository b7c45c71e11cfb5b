#!/usr/bin/python3
"""The figures of bench/python/python.sh, from the workers' --summary-json
files.

  python_compare.py summarize --part P --name N --baseline B --steps S
                              [--load L] DIR
      one JSON line for the run whose worker-*.json files are in DIR
  python_compare.py report --json FILE RUNS.jsonl
      a table per part, each configuration against its baseline; writes
      FILE. A configuration run several times (bench/python/python.sh
      --repeat) is represented by its fastest run; all its times are kept.

Seconds per step: the slowest worker's wall_seconds over the steps (the
runs evaluate nothing inside the training loop). Bytes per step: pushed +
pulled by all workers over the steps; DDP's are computed by worker.py (the
dense fp32 gradient per worker and step), not measured.
"""

import argparse
import glob
import json
import os
import sys


def summarize(args):
    paths = sorted(glob.glob(os.path.join(args.dir, "worker-*.json")))
    if not paths:
        sys.exit(f"python_compare.py: no worker-*.json in {args.dir}")
    workers = []
    for path in paths:
        with open(path) as f:
            workers.append(json.load(f))
    for worker in workers:
        if worker["steps"] != args.steps:
            sys.exit(f"python_compare.py: {args.dir}: a worker ran "
                     f"{worker['steps']} steps, not {args.steps}")
    pushed = sum(w["pushed_bytes"] for w in workers)
    pulled = sum(w["pulled_bytes"] for w in workers)
    fingerprints = [w["weights_fingerprint"] for w in workers]
    run = {
        "part": args.part,
        "name": args.name,
        "baseline": args.baseline or None,
        "worker": workers[0].get("worker", "cpp"),
        "api": workers[0].get("api", "cpp"),
        "steps": args.steps,
        "seconds_per_step": max(w["wall_seconds"] for w in workers)
        / args.steps,
        "pushed_bytes_per_step": pushed / args.steps,
        "bytes_per_step": (pushed + pulled) / args.steps,
        "dense_bytes_per_step": sum(w["dense_equivalent_bytes"]
                                    for w in workers) / args.steps,
        "test_accuracy": workers[0].get("test_accuracy"),
        "final_loss": workers[0]["final_loss"],
        "weights_fingerprint": fingerprints[0],
        "workers_agree": len(set(fingerprints)) == 1,
        "load_average": args.load,
    }
    if "byte_counts" in workers[0]:
        run["byte_counts"] = workers[0]["byte_counts"]
    print(json.dumps(run))


def compare(run, baseline):
    out = {
        "part": run["part"],
        "run": run["name"],
        "baseline": baseline["name"],
        # > 1: the run is faster than its baseline.
        "speedup": baseline["seconds_per_step"] / run["seconds_per_step"],
        "seconds_ratio": run["seconds_per_step"]
        / baseline["seconds_per_step"],
        "pushed_bytes_ratio": run["pushed_bytes_per_step"]
        / baseline["pushed_bytes_per_step"],
        "bytes_ratio": run["bytes_per_step"] / baseline["bytes_per_step"],
        "same_weights": run["weights_fingerprint"]
        == baseline["weights_fingerprint"],
    }
    if run["test_accuracy"] is not None and \
            baseline["test_accuracy"] is not None:
        out["accuracy_difference"] = (run["test_accuracy"]
                                      - baseline["test_accuracy"])
    return out


PART_TITLES = {
    "a": "a) C++ gradwire-worker vs Python worker.py: CNN, Top-K 1% + EF, "
         "1 loopback shard",
    "b": "b) overlap vs none: CNN, 2 shards on shaped links",
    "c": "c) ResNet-18: gradwire Top-K 1% + EF vs torch DDP (gloo)",
}


def fastest(rounds):
    """The fastest of a configuration's runs, with every run's time."""
    best = dict(min(rounds, key=lambda r: r["seconds_per_step"]))
    best["rounds"] = len(rounds)
    best["seconds_per_step_all"] = [r["seconds_per_step"] for r in rounds]
    best["load_average_all"] = [r["load_average"] for r in rounds]
    best["same_result_every_round"] = len(
        {r["weights_fingerprint"] for r in rounds}) == 1
    return best


def report(args):
    with open(args.runs) as f:
        every_run = [json.loads(line) for line in f if line.strip()]
    rounds = {}
    for run in every_run:
        rounds.setdefault((run["part"], run["name"]), []).append(run)
    runs = [fastest(r) for r in rounds.values()]
    by_name = {(r["part"], r["name"]): r for r in runs}
    comparisons = [compare(r, by_name[(r["part"], r["baseline"])])
                   for r in runs if r["baseline"]]
    for part in sorted({r["part"] for r in runs}):
        print(PART_TITLES[part])
        print(f"  {'run':<18} {'steps':>5} {'s/step':>8} {'pushed B/step':>14}"
              f" {'push+pull B/step':>17} {'accuracy':>8} {'replicas':>8}"
              "  s/step of each round (load average)")
        for r in runs:
            if r["part"] != part:
                continue
            accuracy = ("" if r["test_accuracy"] is None
                        else f"{r['test_accuracy']:.4f}")
            print(f"  {r['name']:<18} {r['steps']:>5} "
                  f"{r['seconds_per_step']:>8.3f} "
                  f"{r['pushed_bytes_per_step']:>14.0f} "
                  f"{r['bytes_per_step']:>17.0f} {accuracy:>8} "
                  f"{'equal' if r['workers_agree'] else 'DIFFER':>8}  "
                  + ", ".join(f"{t:.3f} ({load})" for t, load in zip(
                      r["seconds_per_step_all"], r["load_average_all"])))
        for c in comparisons:
            if c["part"] != part:
                continue
            line = (f"  {c['run']} vs {c['baseline']}: "
                    f"{c['seconds_ratio']:.2f}x the seconds per step "
                    f"({c['speedup']:.2f}x speed), "
                    f"{c['pushed_bytes_ratio']:.4g}x the pushed bytes, "
                    f"{c['bytes_ratio']:.4g}x the bytes pushed+pulled")
            if "accuracy_difference" in c:
                line += f", accuracy {c['accuracy_difference']:+.4f}"
            if c["same_weights"]:
                line += ", bit-identical weights"
            print(line)
        if any(r.get("byte_counts") for r in runs if r["part"] == part):
            print("  (DDP bytes are computed: the dense fp32 gradient each "
                  "worker sends and receives per step)")
        print()
    with open(args.json, "w") as f:
        json.dump({"omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                   "runs": runs, "comparisons": comparisons,
                   "every_run": every_run}, f, indent=1)
        f.write("\n")
    print(f"wrote {args.json}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("summarize")
    s.add_argument("--part", required=True, choices=sorted(PART_TITLES))
    s.add_argument("--name", required=True)
    s.add_argument("--baseline", default="")
    s.add_argument("--steps", type=int, required=True)
    s.add_argument("--load", default=None,
                   help="the load average when the run started")
    s.add_argument("dir")
    r = commands.add_parser("report")
    r.add_argument("--json", required=True)
    r.add_argument("runs")
    args = parser.parse_args()
    {"summarize": summarize, "report": report}[args.command](args)


if __name__ == "__main__":
    main()
