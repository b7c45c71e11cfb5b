#!/usr/bin/python3
"""The figures of bench/auto/auto.sh: one row per run, then the table and
the JSON report.

  auto_report.py record --link L --config C --title T --steps N
      [--flags TEXT] --elapsed S --load A
      [--payload measured|computed|none] [--seed N] DIR
  auto_report.py unavailable --link L --config C --title T --reason TEXT
  auto_report.py report --json FILE --command TEXT [--steps N]
      [--slow-steps N] ROWS.jsonl
  auto_report.py convergence --json FILE --command TEXT ROWS.jsonl
  auto_report.py model-record ... | model-report ...  (model_report.py:
      the rows of auto.sh --model=resnet18|gpt)

record reads the two workers' summaries in DIR (worker-0.json and
worker-1.json, gradwire-worker's --summary-json or bench/python/worker.py's)
and prints one JSON line:
  seconds_per_step   the slower worker's training time (train_seconds: the
                     loop without evaluation) over the steps
  payload_bytes_per_step  what both workers pushed and pulled (the
                     summaries' pushed_bytes + pulled_bytes) over the steps;
                     for DDP computed, not measured (what each worker
                     all-reduces: the dense gradient, or the fp16 and
                     PowerSGD hooks' smaller buffers); 0 for compute only
  wire_bytes_per_step  what both workers' kernels counted on their TCP
                     connections during the steps (the summaries'
                     wire_sent_bytes + wire_received_bytes less their
                     startup_wire_* counts), per step; null unless every
                     summary has all four
  link_bytes_per_step  what both workers' network interfaces (eth0 of
                     each worker host) sent and received during the steps,
                     per step: DDP rows between the end of start-up and the
                     end of the last step, as each rank read its own
                     counters (bench/auto/ddp_link.py: the summaries'
                     link_*); gradwire rows the workers' whole run, as read
                     by auto.sh before and after it (DIR/link-start.txt,
                     DIR/link-end.txt), less the start-up's TCP payload
                     (the summaries' startup_wire_*; its headers stay in);
                     null otherwise. Per worker:
                     link_{sent,received}_bytes_per_step; the whole run's:
                     link_run_{sent,received}_bytes. The counters count
                     packets as the kernel hands them to the interface:
                     payload, headers and retransmissions, but with
                     segmentation offload (veth has it) headers once per
                     packet of up to 64 KiB, not once per ~1.5 kB frame as
                     a physical wire would carry them
  warmup_steps, link_bytes_per_step_after_warmup  PowerSGD rows: the
                     steps that all-reduce the dense gradient before
                     PowerSGD starts, and link_bytes_per_step after them
  test_accuracy      worker 0's test accuracy after the steps
  startup_seconds    from launching both workers to both having exited, less
                     the slower worker's training loop (wall_seconds):
                     loading data and model, connecting and Init (DDP:
                     init_process_group), writing the summary, exiting;
                     worker_startup_seconds: the slower worker's own
                     startup_seconds, where its summary has one
report prints a table per link and writes FILE: the machine, the command
and every row, with each row's times against the compute-only row.
convergence does the same for --convergence runs: accuracy per seed, mean
and half the range, and a Markdown table for docs/convergence.md.
"""

import argparse
import datetime
import glob
import importlib.metadata
import json
import os
import platform
import sys

import model_report  # bench/auto/model_report.py: --model's rows
from link_bytes import link_fields  # bench/auto/link_bytes.py, beside

PROG = "auto_report.py"


def read_summaries(directory):
    paths = sorted(glob.glob(os.path.join(directory, "worker-*.json")))
    if len(paths) < 2:
        sys.exit(f"{PROG}: {directory}: expected 2 worker summaries, "
                 f"found {len(paths)}")
    summaries = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            summaries.append(json.load(f))
    return summaries


# The bytes each worker's kernel counted on its TCP connections (TCP_INFO),
# where gradwire-worker's summary has them.
# The steps' share: the totals less what start-up (Init and the first pull)
# carried, as the payload figures count the steps only.
WIRE_FIELDS = (("wire_sent_bytes", "startup_wire_sent_bytes"),
               ("wire_received_bytes", "startup_wire_received_bytes"))


def wire_bytes(summaries):
    """Both workers' wire bytes of the steps, sent and received; None unless
    every summary has every count (a partial sum would understate the
    wire)."""
    total = 0
    for s in summaries:
        for key, startup_key in WIRE_FIELDS:
            value, startup = s.get(key), s.get(startup_key)
            if not all(isinstance(v, (int, float)) for v in (value, startup)):
                return None
            total += value - startup
    return total


def reported_startup(summaries):
    """The slower worker's own start-up seconds, where summaries have it."""
    values = [s.get("startup_seconds") for s in summaries]
    if not all(isinstance(v, (int, float)) for v in values):
        return None
    return max(values)


def record(args):
    summaries = read_summaries(args.dir)
    steps = max(s["steps"] for s in summaries)
    if steps < 1:
        sys.exit(f"{PROG}: {args.dir}: the workers ran no steps")
    train = max(s.get("train_seconds", s["wall_seconds"]) for s in summaries)
    wall = max(s["wall_seconds"] for s in summaries)
    first = next((s for s in summaries if s.get("worker_id") == 0),
                 summaries[0])
    payload = sum(s.get("pushed_bytes", 0) + s.get("pulled_bytes", 0)
                  for s in summaries)
    wire = wire_bytes(summaries)
    row = {
        "link": args.link, "config": args.config, "title": args.title,
        "flags": args.flags, "status": "ok", "steps": steps,
        "reduced_steps": steps < args.steps,
        "seconds_per_step": round(train / steps, 4),
        "payload_bytes_per_step": (None if args.payload == "none"
                                   else round(payload / steps)),
        "payload_bytes": args.payload,
        "wire_bytes_per_step": None if wire is None else round(wire / steps),
        "test_accuracy": first.get("test_accuracy"),
        "startup_seconds": round(max(args.elapsed - wall, 0.0), 2),
        "worker_startup_seconds": reported_startup(summaries),
        "load_average": args.load,
    }
    row.update(link_fields(args.dir, summaries, steps))
    if args.payload == "none":
        row["payload_bytes_per_step"] = 0
    if args.seed is not None:
        row["seed"] = args.seed
        row["epochs_run"] = len(first.get("epoch_loss", []))
    print(json.dumps(row))


def unavailable(args):
    row = {"link": args.link, "config": args.config, "title": args.title,
           "status": args.status, "reason": args.reason}
    if args.seed is not None:
        row["seed"] = args.seed
    print(json.dumps(row))


def machine():
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = None
    return {"cpu": model, "cores": os.cpu_count(),
            "kernel": platform.release(), "python": platform.python_version(),
            "torch": torch,
            "load_average_at_end": round(os.getloadavg()[0], 2)}


def read_rows(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def cell(value, form):
    return "—" if value is None else form.format(value)


def print_table(rows, compute):
    header = ("config", "steps", "s/step", "x compute", "payload B/step",
              "wire B/step", "link B/step", "accuracy", "start-up s")
    widths = (27, 6, 9, 9, 15, 12, 14, 8, 10)
    links = list(dict.fromkeys(r["link"] for r in rows))
    for link in links:
        print(f"\nlink: {link}")
        print("  " + " ".join(h.rjust(w) if i else h.ljust(w)
                              for i, (h, w) in enumerate(zip(header, widths))))
        for r in (r for r in rows if r["link"] == link):
            if r["status"] != "ok":
                print(f"  {r['title']:<27} {r['status']}: {r['reason']}")
                continue
            steps = f"{r['steps']}{'*' if r['reduced_steps'] else ''}"
            payload = cell(r["payload_bytes_per_step"], "{:,}")
            if r["payload_bytes"] == "computed":
                payload += "c"
            on_link = cell(r.get("link_bytes_per_step"), "{:,}")
            if r.get("link_window") == "run less start-up payload":
                on_link += "~"
            cells = (r["title"], steps, cell(r["seconds_per_step"], "{:.4f}"),
                     cell(r.get("vs_compute"), "{:.2f}"), payload,
                     cell(r["wire_bytes_per_step"], "{:,}"), on_link,
                     cell(r["test_accuracy"], "{:.4f}"),
                     cell(r["startup_seconds"], "{:.2f}"))
            print("  " + " ".join(c.rjust(w) if i else c.ljust(w)
                                  for i, (c, w) in enumerate(zip(cells,
                                                                 widths))))
            if "warmup_steps" in r:
                after = cell(r["link_bytes_per_step_after_warmup"], "{:,}")
                print(f"    after its {r['warmup_steps']} warm-up steps "
                      f"(dense all-reduce): {after} link B/step")
    if compute is None:
        print("\nx compute: no compute-only row in this run")
    print("* fewer steps than the others (a slow row); c: DDP's bytes, "
          "computed (what it all-reduces), not measured")
    print("link: both worker hosts' interface bytes (sent + received) per "
          "step; DDP: from the end of start-up to the last step;\n  ~: "
          "gradwire: the workers' whole run less their start-up's TCP "
          "payload (Init, first pull)")


def report(args):
    rows = read_rows(args.rows)
    compute = next((r for r in rows if r["config"] == "compute"
                    and r["status"] == "ok"), None)
    for r in rows:
        if r["status"] == "ok" and compute is not None:
            r["vs_compute"] = round(r["seconds_per_step"]
                                    / compute["seconds_per_step"], 3)
    print_table(rows, compute)
    out = {"benchmark": "bench/auto/auto.sh",
           "date": datetime.datetime.now(datetime.timezone.utc)
           .strftime("%Y-%m-%dT%H:%M:%SZ"),
           "machine": machine(), "command": args.command,
           "model": "cnn", "workers": 2, "shards": 2,
           "steps": args.steps, "slow_steps": args.slow_steps,
           "fields": FIELDS, "rows": rows}
    write_json(args.json, out)


FIELDS = {
    "seconds_per_step": "the slower worker's train_seconds over the steps",
    "vs_compute": "seconds_per_step over the compute-only row's",
    "payload_bytes_per_step": "pushed + pulled bytes of both workers over "
                              "the steps (payload_bytes says: measured, or "
                              "computed for DDP)",
    "wire_bytes_per_step": "wire_sent_bytes + wire_received_bytes (TCP, "
                           "counted by the kernel) of both workers less "
                           "their startup_wire_* counts, over the steps; "
                           "null where a summary lacks them",
    "link_bytes_per_step": "both worker hosts' eth0 bytes sent + received "
                           "during the steps, over the steps (payload and "
                           "headers, one header per offloaded packet of up "
                           "to 64 KiB); link_window says how the steps "
                           "were told apart; null where not measured",
    "link_window": "steps: each DDP rank read its interface after start-up "
                   "and after its last step (barriers before both); run "
                   "less start-up payload: gradwire, auto.sh's reads "
                   "before and after the workers' run less the summaries' "
                   "startup_wire_* (start-up's TCP payload; its headers, "
                   "and whatever follows the last step, stay in)",
    "link_sent_bytes_per_step": "per worker (by worker id): bytes its "
                                "interface sent during the steps, per step",
    "link_received_bytes_per_step": "per worker: bytes received, per step",
    "link_run_sent_bytes": "per worker: bytes sent from launch to exit "
                           "(start-up and evaluation included)",
    "link_run_received_bytes": "per worker: bytes received from launch to "
                               "exit",
    "warmup_steps": "DDP PowerSGD rows: the steps before PowerSGD starts "
                    "(start_powerSGD_iter), which all-reduce the dense "
                    "gradient",
    "link_bytes_per_step_after_warmup": "link_bytes_per_step over the "
                                        "steps after warmup_steps only",
    "worker_startup_seconds": "the slower worker's own startup_seconds; "
                              "null where the summaries lack it",
    "test_accuracy": "worker 0 after the row's steps",
    "startup_seconds": "launch to exit of both workers less the slower "
                       "worker's wall_seconds",
    "reduced_steps": "true where a slow row ran slow_steps instead of steps",
}


def write_json(path, out):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {path}")


def convergence(args):
    rows = read_rows(args.rows)
    groups = {}
    for r in rows:
        groups.setdefault((r["title"], r["link"]), []).append(r)
    seeds = sorted({r["seed"] for r in rows if r.get("seed") is not None})
    table = ["| setting | link | "
             + " | ".join(f"seed {s}" for s in seeds)
             + " | mean ± half range | s/step |",
             "|---|---|" + "---:|" * (len(seeds) + 2)]
    summary = []
    for (title, link), runs in groups.items():
        ok = [r for r in runs if r["status"] == "ok"]
        if not ok:
            table.append(f"| {title} | {link} | {runs[0]['status']}: "
                         f"{runs[0]['reason']} |")
            continue
        by_seed = {r["seed"]: r["test_accuracy"] for r in ok}
        accuracies = [a for a in by_seed.values() if a is not None]
        mean = sum(accuracies) / len(accuracies)
        half = (max(accuracies) - min(accuracies)) / 2
        step = sum(r["seconds_per_step"] for r in ok) / len(ok)
        table.append(f"| {title} | {link} | " + " | ".join(
            cell(by_seed.get(s), "{:.4f}") for s in seeds)
            + f" | {mean:.4f} ± {half:.4f} | {step:.4f} |")
        summary.append({"title": title, "link": link, "mean": round(mean, 6),
                        "half_range": round(half, 6)})
    print("\n".join(table))
    write_json(args.json, {
        "benchmark": "bench/auto/auto.sh --convergence",
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(), "command": args.command, "model": "cnn",
        "epochs": 1, "workers": 2, "shards": 2, "fields": FIELDS,
        "summary": summary, "markdown": table, "rows": rows})


def main(argv):
    parser = argparse.ArgumentParser(prog=PROG)
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record")
    for name in ("link", "config", "title"):
        r.add_argument(f"--{name}", required=True)
    r.add_argument("--steps", type=int, required=True,
                   help="the matrix's step count (fewer: a slow row)")
    r.add_argument("--flags", default="")
    r.add_argument("--elapsed", type=float, required=True)
    r.add_argument("--load", type=float, required=True)
    r.add_argument("--payload", choices=("measured", "computed", "none"),
                   default="measured")
    r.add_argument("--seed", type=int)
    r.add_argument("dir")
    u = sub.add_parser("unavailable")
    for name in ("link", "config", "title", "reason"):
        u.add_argument(f"--{name}", required=True)
    u.add_argument("--seed", type=int)
    u.add_argument("--status", choices=("not available", "failed"),
                   default="not available")
    for name in ("report", "convergence"):
        p = sub.add_parser(name)
        p.add_argument("--json", required=True)
        p.add_argument("--command", required=True)
        p.add_argument("--steps", type=int)
        p.add_argument("--slow-steps", type=int)
        p.add_argument("rows")
    model_report.add_parsers(sub)
    args = parser.parse_args(argv)
    {"record": record, "unavailable": unavailable, "report": report,
     "convergence": convergence,
     "model-record": model_report.model_record,
     "model-report": lambda a: model_report.model_report(a, machine,
                                                         write_json),
     }[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
