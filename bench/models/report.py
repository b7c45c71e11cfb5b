"""The tables of bench/models/models.py: a sitting's runs (or a --report
file's) against DDP's, their means over seeds, and where the memory went
(--rss-parts)."""


def ddp_bytes(parameters, workers):
    """A ring all-reduce's bytes per worker per step, both ways."""
    return 2 * 2 * (workers - 1) / workers * 4 * parameters


def table(runs):
    lines = ["| model | workers | seed | method | accuracy / perplexity | "
             "vs DDP | bytes/step, both ways | vs DDP | s/step | "
             "peak MB | vs DDP |", "|" + "---|" * 11]
    # Against DDP's run of the same model, workers, seed and length.
    ddp = {(r["model"], r["workers"], r["seed"], r["steps"]): r for r in runs
           if r["method"] == "ddp"}
    for r in runs:
        base = ddp.get((r["model"], r["workers"], r["seed"], r["steps"]))
        parameters = r.get("parameters") or (base or {}).get("parameters")
        metric = (f"{100 * r['metric']:.2f}%" if r["model"] == "resnet"
                  else f"{r['metric']:.2f}")
        if r.get("ranks_agree") is False:
            metric += " (ranks differ)"
        versus = bytes_versus = memory_versus = ""
        sent = r.get("bytes_per_worker_step")
        if r["method"] == "ddp" and parameters:
            sent = ddp_bytes(parameters, r["workers"])
        if base is not None and r is not base:
            if r["model"] == "resnet":
                versus = f"{100 * (r['metric'] - base['metric']):+.2f} pt"
            else:
                versus = f"{100 * (r['metric'] / base['metric'] - 1):+.1f}%"
            if sent and parameters:
                bytes_versus = (f"1/{ddp_bytes(parameters, r['workers']) / sent:.0f}")
            memory_versus = f"{r['peak_rss_mb'] / base['peak_rss_mb']:.2f}x"
        sent_text = f"{sent / 1e6:.2f} MB" if sent else "?"
        lines.append(
            f"| {r['model']} | {r['workers']} | {r['seed']} | {r['method']} "
            f"| {metric} | {versus} | {sent_text} | {bytes_versus} | "
            f"{r['seconds_per_step']:.2f} | {r['peak_rss_mb']:.0f} | "
            f"{memory_versus} |")
    return "\n".join(lines)


def means(runs):
    """Per model, workers and method over its seeds: the mean metric and
    half its range, and the difference of the means to DDP's (points of
    accuracy, or percent of perplexity), beside DDP's own half range.
    A run whose ranks ended with different weights is left out."""
    groups = {}
    for r in (r for r in runs if r.get("ranks_agree") is not False):
        groups.setdefault((r["model"], r["workers"], r["method"],
                           r["steps"]), []).append(r["metric"])
    lines = ["| model | workers | method | seeds | mean ± half range | "
             "vs DDP's mean |", "|" + "---|" * 6]
    for (model, workers, method, steps), values in groups.items():
        mean = sum(values) / len(values)
        half = (max(values) - min(values)) / 2
        ddp = groups.get((model, workers, "ddp", steps))
        versus = ""
        if ddp and method != "ddp":
            base = sum(ddp) / len(ddp)
            versus = (f"{100 * (mean - base):+.2f} pt" if model == "resnet"
                      else f"{100 * (mean / base - 1):+.1f}%")
        shown = (f"{100 * mean:.2f} ± {100 * half:.2f}%" if model == "resnet"
                 else f"{mean:.2f} ± {half:.2f}")
        lines.append(f"| {model} | {workers} | {method} | {len(values)} | "
                     f"{shown} | {versus} |")
    return "\n".join(lines)


def memory_parts(runs):
    """Per model, workers, method and rank, over the runs that kept
    rss_parts (--rss-parts): the median of the training's peak resident
    memory (the script's ru_maxrss), and of the sampled peak's data
    (heap and anonymous memory) and mapped libraries, with the runs'
    range. Empty where no run kept them."""
    groups = {}
    for r in runs:
        for rank in r["ranks"]:
            parts = rank.get("rss_parts")
            if parts is None:
                continue
            mb = parts["peak_parts_mb"]
            data = sum(mb.get(k, 0) for k in ("heap", "anonymous", "stacks"))
            groups.setdefault((r["model"], r["workers"], r["method"],
                               rank["rank"]), []).append(
                (rank["peak_rss_mb"], data, sum(mb.values()) - data,
                 mb.get("grpc, protobuf, abseil", 0) + mb.get("gradwire", 0)))
    if not groups:
        return ""

    def median(values):
        values = sorted(values)
        return values[len(values) // 2]

    def shown(values):
        return (f"{median(values):.0f} ({min(values):.0f}–"
                f"{max(values):.0f})")

    lines = ["| model | workers | method | rank | runs | training peak MB | "
             "heap and anonymous MB | libraries MB | of which gRPC, "
             "protobuf, Abseil, gradwire |", "|" + "---|" * 9]
    for (model, workers, method, rank), rows in sorted(groups.items()):
        columns = list(zip(*rows))
        lines.append(f"| {model} | {workers} | {method} | {rank} | "
                     f"{len(rows)} | {shown(columns[0])} | "
                     f"{shown(columns[1])} | {median(columns[2]):.1f} | "
                     f"{median(columns[3]):.1f} |")
    return "\n".join(lines)


def tables(runs):
    """The tables printed for a sitting or a --report."""
    parts = memory_parts(runs)
    return "\n\n".join(filter(None, [table(runs), means(runs), parts]))
