"""The figures of bench/auto/auto.sh --model=resnet18|gpt, as
auto_report.py's commands model-record and model-report:

  auto_report.py model-record --link L --config C --title T --steps N
      [--compression SPEC] [--hook SPEC] --elapsed S --load A DIR
  auto_report.py model-report --json FILE --command TEXT --model M
      [--steps N] [--slow-steps N] [--eval-every N] [--target V] ROWS

model-record reads the two ranks' summaries in DIR (worker-0.json,
worker-1.json: the script's --summary with bench/auto/periodic_eval.py's
fields), gradwire's stats (stats-0.json, stats-1.json: GRADWIRE_STATS_JSON)
and auto.sh's link counters, and prints one JSON line; FIELDS says what
each field is. model-report adds each row's ratio to the compute-only row,
to the fastest DDP peer of its link and its time to the target, prints a
table per link and one of the times to the target, and writes FILE with the
commit, the machine and the command.
"""

import datetime
import glob
import json
import os
import sys

from link_bytes import link_fields  # bench/auto/link_bytes.py, beside

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                os.pardir, "models"))
import models  # noqa: E402  (bench/models/models.py: provenance, ddp_bytes)

PROG = "auto_report.py"
HEADER = ("config", "steps", "s/step", "x compute", "x peer",
          "payload B/step", "link B/step", "METRIC", "to target",
          "start-up s")
WIDTHS = (34, 6, 8, 9, 7, 15, 14, 10, 16, 10)


def read_json(directory, pattern):
    out = []
    for path in sorted(glob.glob(os.path.join(directory, pattern))):
        with open(path, encoding="utf-8") as f:
            out.append(json.load(f))
    return out


def payload_bytes(summaries, stats, config):
    """Both workers' bytes of the steps, both ways, per step, and how they
    were had: gradwire's measured (the stats' pushed + pulled), DDP's
    computed (a ring all-reduce of 2 ranks sends and receives what it
    reduces, each rank: 4x that for both), none for compute only."""
    steps = summaries[0]["steps"]
    if config == "compute":
        return 0, "none"
    if config.startswith("gradwire"):
        if len(stats) < 2:
            return None, "measured"
        total = sum(s["pushed_bytes"] + s["pulled_bytes"] for s in stats)
        return round(total / steps), "measured"
    hook = summaries[0].get("ddp_hook")
    reduced = (hook["allreduced_bytes_per_step"] if hook
               else 4 * summaries[0]["parameters"])
    return round(4 * reduced), "computed"


def model_record(args):
    summaries = read_json(args.dir, "worker-*.json")
    if len(summaries) < 2:
        sys.exit(f"{PROG}: {args.dir}: expected 2 summaries, found "
                 f"{len(summaries)}")
    for i, s in enumerate(summaries):
        s.setdefault("worker_id", s.get("rank", i))
    first = next(s for s in summaries if s["worker_id"] == 0)
    if "train_seconds" not in first:
        sys.exit(f"{PROG}: {args.dir}: the summaries lack periodic_eval.py's "
                 "fields (did the script build a LambdaLR?)")
    steps = first["steps"]
    stats = read_json(args.dir, "stats-*.json")
    payload, kind = payload_bytes(summaries, stats, args.config)
    train = max(s["train_seconds"] for s in summaries)
    row = {"link": args.link, "config": args.config, "title": args.title,
           "compression": args.compression or None,
           "ddp_hook": args.hook or None, "status": "ok", "steps": steps,
           "reduced_steps": steps < args.steps,
           "seconds_per_step": round(train / steps, 4),
           "eval_seconds": max(s["eval_seconds"] for s in summaries),
           "payload_bytes_per_step": payload, "payload_bytes": kind,
           "metric": first["metric"],
           "higher_is_better": first["higher_is_better"],
           "final_metric": first.get(first["metric"]),
           "evaluations": first["evaluations"],
           "startup_seconds": round(max(s["startup_seconds"]
                                        for s in summaries), 2),
           "elapsed_seconds": round(args.elapsed, 2),
           "peak_rss_mb": round(max(s["peak_rss_mb"] for s in summaries)),
           "parameters": first["parameters"], "load_average": args.load}
    if stats:
        row["gradwire_startup_seconds"] = max(s["startup_seconds"]
                                              for s in stats)
    if args.config != "compute":
        row.update(link_fields(args.dir, summaries, steps))
    print(json.dumps(row))


def better(row, value, target):
    return value >= target if row["higher_is_better"] else value <= target


def default_target(rows):
    """(value, where): the worst final value among the DDP dense rows that
    ran every step (each reaches it, at its last step at the latest)."""
    dense = [r for r in rows if r["config"] == "ddp" and r["status"] == "ok"
             and not r["reduced_steps"] and r["final_metric"] is not None]
    dense = dense or [r for r in rows if r["config"] == "ddp"
                      and r["status"] == "ok"
                      and r["final_metric"] is not None]
    if not dense:
        return None, None
    worst = min(dense, key=lambda r: r["final_metric"]
                if r["higher_is_better"] else -r["final_metric"])
    return worst["final_metric"], f"DDP dense's final value at {worst['link']}"


def first_reached(row, target):
    return next((e for e in row["evaluations"]
                 if better(row, e["metric"], target)), None)


def time_to_target(row, rows, target):
    """{step, seconds, how}: the first evaluation at or past the target,
    seconds from launch (start-up + training, evaluations left out). A row
    of fewer steps that did not get there is projected: the step at which
    its configuration got there on a link where it ran every step, times
    this row's seconds per step (its trajectory per step does not depend
    on the link; auto's does, and is not projected)."""
    if target is None or row["config"] == "compute":
        return None
    hit = first_reached(row, target)
    if hit is not None:
        return {"step": hit["step"], "how": "measured",
                "seconds": round(row["startup_seconds"] + hit["seconds"], 1)}
    if not row["reduced_steps"] or row["config"].endswith("auto"):
        return {"step": None, "how": "not reached", "seconds": None}
    for other in rows:
        if (other["config"] == row["config"] and other["status"] == "ok"
                and not other["reduced_steps"]):
            hit = first_reached(other, target)
            if hit is not None:
                seconds = (row["startup_seconds"]
                           + hit["step"] * row["seconds_per_step"])
                return {"step": hit["step"], "how": "projected",
                        "seconds": round(seconds, 1)}
    return {"step": None, "how": "not reached", "seconds": None}


def add_ratios(rows, target):
    compute = next((r for r in rows if r["config"] == "compute"
                    and r["status"] == "ok"), None)
    ok = [r for r in rows if r["status"] == "ok"]
    for r in ok:
        if compute is not None:
            r["vs_compute"] = round(r["seconds_per_step"]
                                    / compute["seconds_per_step"], 3)
        r["time_to_target"] = time_to_target(r, ok, target)
    for link in dict.fromkeys(r["link"] for r in ok):
        peers = [r for r in ok if r["link"] == link
                 and r["config"].startswith("ddp")]
        if not peers:
            continue
        fastest = min(peers, key=lambda r: r["seconds_per_step"])
        fastest["fastest_peer"] = True
        reached = [r for r in peers if (r["time_to_target"] or {})
                   .get("seconds") is not None]
        soonest = min(reached, key=lambda r: r["time_to_target"]["seconds"],
                      default=None)
        for r in (r for r in ok if r["link"] == link
                  and r["config"].startswith("gradwire")):
            r["vs_fastest_peer"] = {
                "peer": fastest["config"],
                "seconds_per_step": round(r["seconds_per_step"]
                                          / fastest["seconds_per_step"], 3)}
            mine = (r["time_to_target"] or {}).get("seconds")
            if soonest is not None and mine is not None:
                r["vs_fastest_peer"]["time_to_target_peer"] = \
                    soonest["config"]
                r["vs_fastest_peer"]["time_to_target"] = round(
                    mine / soonest["time_to_target"]["seconds"], 3)


def cell(value, form):
    return "—" if value is None else form.format(value)


def target_cell(tta):
    if tta is None:
        return "—"
    if tta["seconds"] is None:
        return tta["how"]
    mark = "p" if tta["how"] == "projected" else ""
    return f"{tta['seconds']:.0f}{mark} @{tta['step']}"


def line(cells):
    return "  " + " ".join(c.rjust(w) if i else c.ljust(w)
                           for i, (c, w) in enumerate(zip(cells, WIDTHS)))


def print_tables(rows, metric, target, where):
    name = "accuracy" if metric == "test_accuracy" else "perplexity"
    form = "{:.4f}" if metric == "test_accuracy" else "{:.2f}"
    print(f"target: {name} {cell(target, form)} ({where or 'none'})")
    for link in dict.fromkeys(r["link"] for r in rows):
        print(f"\nlink: {link}")
        print(line([h.replace("METRIC", name) for h in HEADER]))
        for r in (r for r in rows if r["link"] == link):
            if r["status"] != "ok":
                print(f"  {r['title']:<34} {r['status']}: {r['reason']}")
                continue
            title = r["title"] + (" (fastest peer)" if r.get("fastest_peer")
                                  else "")
            versus = (r.get("vs_fastest_peer") or {}).get("seconds_per_step")
            payload = cell(r["payload_bytes_per_step"], "{:,}")
            if r["payload_bytes"] == "computed":
                payload += "c"
            steps = f"{r['steps']}{'*' if r['reduced_steps'] else ''}"
            print(line((title, steps,
                        cell(r["seconds_per_step"], "{:.3f}"),
                        cell(r.get("vs_compute"), "{:.2f}"),
                        cell(versus, "{:.2f}"), payload,
                        cell(r.get("link_bytes_per_step"), "{:,}"),
                        cell(r["final_metric"], form),
                        target_cell(r.get("time_to_target")),
                        cell(r["startup_seconds"], "{:.1f}"))))
            if "warmup_steps" in r:
                after = cell(r["link_bytes_per_step_after_warmup"], "{:,}")
                print(f"    after its {r['warmup_steps']} dense warm-up "
                      f"steps: {after} link B/step")
    print("\n* fewer steps (a slow row); c: DDP's bytes computed (what it "
          "all-reduces), not measured; x peer: s/step over the fastest DDP "
          "row's of the link;\n  to target: seconds from launch (evaluations "
          "left out) @ the step of the first evaluation at or past the "
          "target; p: projected")


def print_time_table(rows):
    """Seconds to the target, a row per configuration, a column per link,
    gradwire's against the soonest DDP peer's."""
    ok = [r for r in rows if r["status"] == "ok" and r["config"] != "compute"]
    links = list(dict.fromkeys(r["link"] for r in ok))
    print("\ntime to target (s from launch; x: against the soonest DDP row)")
    print("  " + "config".ljust(34) + "".join(f"{k:>18}" for k in links))
    for config in dict.fromkeys(r["config"] for r in ok):
        cells = []
        for link in links:
            r = next((r for r in ok if r["config"] == config
                      and r["link"] == link), None)
            text = "" if r is None else target_cell(r["time_to_target"])
            ratio = ((r or {}).get("vs_fastest_peer") or {}).get(
                "time_to_target")
            if ratio is not None:
                text += f" {ratio:.2f}x"
            cells.append(f"{text:>18}")
        title = next(r["title"] for r in ok if r["config"] == config)
        print("  " + title.ljust(34) + "".join(cells))


def model_report(args, machine, write_json):
    """machine() and write_json(): auto_report.py's, as the CNN's JSON."""
    with open(args.rows, encoding="utf-8") as f:
        rows = [json.loads(text) for text in f if text.strip()]
    ok = [r for r in rows if r["status"] == "ok"]
    metric = ok[0]["metric"] if ok else None
    if args.target is not None:
        target, where = args.target, "--target"
    else:
        target, where = default_target(ok)
    add_ratios(rows, target)
    print_tables(rows, metric, target, where)
    print_time_table(rows)
    out = models.provenance(sys.argv)
    out["machine"].update(machine())
    out.update({"benchmark": "bench/auto/auto.sh --model",
                "date": datetime.datetime.now(datetime.timezone.utc)
                .strftime("%Y-%m-%dT%H:%M:%SZ"), "command": args.command,
                "model": args.model, "workers": 2, "shards": 2,
                "steps": args.steps, "slow_steps": args.slow_steps,
                "eval_every": args.eval_every, "metric": metric,
                "target": {"value": target, "from": where},
                "fields": FIELDS, "rows": rows})
    write_json(args.json, out)


FIELDS = {
    "seconds_per_step": "the slower rank's training time over its steps: "
                        "the script's seconds_per_step x steps less the "
                        "evaluations (eval_seconds)",
    "vs_compute": "seconds_per_step over the compute-only row's (two "
                  "one-worker copies of original.py at once)",
    "fastest_peer": "true on the DDP row of the link with the least "
                    "seconds_per_step",
    "vs_fastest_peer": "gradwire rows: seconds_per_step over the fastest "
                       "peer's, and time_to_target over the DDP row's "
                       "that got there soonest",
    "payload_bytes_per_step": "both workers' bytes of the steps, both "
                              "ways: gradwire's pushed + pulled "
                              "(GRADWIRE_STATS_JSON), DDP's computed, 4x "
                              "what a rank all-reduces (2 ranks)",
    "link_bytes_per_step": "both worker hosts' eth0 bytes sent + received "
                           "from the end of start-up to the last step "
                           "(each rank's reads, periodic_eval.py; headers "
                           "once per offloaded packet of up to 64 KiB)",
    "link_run_sent_bytes": "per worker: bytes its host sent from launch to "
                           "exit (auto.sh's reads)",
    "link_run_received_bytes": "per worker: bytes received, launch to exit",
    "warmup_steps": "DDP PowerSGD: the dense steps before it starts",
    "link_bytes_per_step_after_warmup": "link_bytes_per_step after them",
    "metric": "test_accuracy (ResNet-18, --test-limit images) or "
              "test_perplexity (GPT, held-out windows), rank 0's",
    "final_metric": "the script's own value after the last step",
    "evaluations": "rank 0's [{step, seconds, metric}]: seconds of "
                   "training (evaluations left out) when the step ended",
    "time_to_target": "{step, seconds, how}: the first evaluation at or "
                      "past target, seconds from launch (startup_seconds "
                      "+ its seconds); how: measured, projected (a row of "
                      "fewer steps: the step of its configuration's full "
                      "row x its seconds_per_step) or not reached",
    "startup_seconds": "launch of the row's processes to the first step, "
                       "the slower rank (imports, data, init_process_group "
                       "or gradwire run's health check and Init)",
    "gradwire_startup_seconds": "gradwire's own count (Init, first pull)",
    "eval_seconds": "the slower rank's evaluations, barriers and reads "
                    "inside the training loop",
    "elapsed_seconds": "launch to both ranks' exit, evaluations included",
    "peak_rss_mb": "the larger rank's peak resident memory",
    "reduced_steps": "true where a slow row ran slow_steps",
}


def add_parsers(sub):
    """model-record and model-report, under auto_report.py's commands."""
    r = sub.add_parser("model-record")
    for name in ("link", "config", "title"):
        r.add_argument(f"--{name}", required=True)
    r.add_argument("--steps", type=int, required=True,
                   help="the matrix's step count (fewer: a slow row)")
    r.add_argument("--compression", default="")
    r.add_argument("--hook", default="")
    r.add_argument("--elapsed", type=float, required=True)
    r.add_argument("--load", type=float, required=True)
    r.add_argument("dir")
    p = sub.add_parser("model-report")
    p.add_argument("--json", required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--steps", type=int)
    p.add_argument("--slow-steps", type=int)
    p.add_argument("--eval-every", type=int)
    p.add_argument("--target", type=float)
    p.add_argument("rows")
