"""The table of figures: each figure's id, its data files, and the function
that computes its text from them (figures.py reads FIGURES).

A function gets the data files' JSON, in the order of its paths, and
returns the text that stands between the figure's markers in the Markdown.
Where a figure rests on repeated runs (or seeds), its text is the median
(accuracy over seeds: the mean, as docs/convergence.md gives it) and says
how many runs and their range.
"""

from figures_provenance import machines

DATA = "docs/benchmarks/data"
MODELS = f"{DATA}/models-2026-12-06.json"
POWERSGD = f"{DATA}/models-powersgd-2026-12-07.json"
COMPRESS = f"{DATA}/compress.json"
COMPRESS_25M = f"{DATA}/compress-25m-spare.json"
AUTO = f"{DATA}/auto-chooser-settled-2026-12-05.json"
LOAD = (f"{DATA}/load-asp-since-44-new-1.json",
        f"{DATA}/load-asp-since-44-new-2.json")
LOAD_SHARED = f"{DATA}/load-asp-shared-vs-per-worker.json"
LOAD_PUBLISH = f"{DATA}/load-asp-publish-every.json"
NETWORK = tuple(f"{DATA}/network-{link}-200steps-buckets.json"
                for link in ("1gbit", "100mbit", "10mbit"))
LINKS = {"10mbit": "at 10 Mbit/s", "100mbit": "at 100 Mbit/s",
         "1gbit": "at 1 Gbit/s", "unshaped": "on unshaped links"}
KERNELS = {"avx512": "AVX-512", "avx2": "AVX2", "portable": "portable"}

FIGURES = {}


def figure(name, *sources):
    """Registers the decorated function as the figure NAME, computed from
    the data files SOURCES (paths from the repository's root)."""
    def register(compute):
        FIGURES[name] = (sources, compute)
        return compute
    return register


# Arithmetic and wording.

def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def spread(values, show, unit="runs"):
    """How the repeats behind a median read: 'one run', 'the same in
    each of 3 seeds' (every repeat shows the same), or 'median of 2 runs,
    5,898–5,995'."""
    if len(values) == 1:
        return f"one {unit[:-1]}"
    low, high = show(min(values)), show(max(values))
    if low == high:
        return f"the same in each of {len(values)} {unit}"
    return f"median of {len(values)} {unit}, {low}–{high}"


def listed(words):
    words = list(words)
    return words[0] if len(words) == 1 else \
        ", ".join(words[:-1]) + " and " + words[-1]


def seeds(runs):
    found = sorted({r["seed"] for r in runs})
    return ("seed " if len(found) == 1 else "seeds ") + \
        listed(str(s) for s in found)


def times(ratio):
    return f"{ratio:.1f}×" if ratio >= 2 else f"{ratio:.2f}×"


def megabytes(value):
    return f"{value / 1e6:.2f} MB"


def machine(*documents):
    """'2-core Intel Xeon': the machines the documents record."""
    names = sorted({m for d in documents for m in machines(d)})
    return listed(names) if names else "machine the data do not name"


# bench/models/models.py's JSON: the user's scripts against DDP.

def model_runs(document, model, *methods):
    """The runs of MODEL by one of METHODS, leaving out a run whose ranks
    ended with different weights (its figure is not a result)."""
    return [r for r in document["runs"] if r["model"] == model
            and r["method"] in methods and r.get("ranks_agree") is not False]


def ddp_bytes(run):
    """A ring all-reduce's bytes per worker per step, both ways: 2 (W-1)/W
    of the fp32 gradient each way (as bench/models/models.py computes
    DDP's)."""
    workers = run["workers"]
    return 2 * 2 * (workers - 1) / workers * 4 * run["parameters"]


def ddp_of(document, run):
    """DDP's run of the same model, workers, seed and steps."""
    for base in model_runs(document, run["model"], "ddp"):
        if all(base[k] == run[k] for k in ("workers", "seed", "steps")):
            return base
    raise KeyError(f"no DDP run for {run['model']} seed {run['seed']}")


@figure("resnet_bytes_ratio", MODELS)
def resnet_bytes_ratio(models):
    runs = model_runs(models, "resnet", "gradwire")
    ratios = [ddp_bytes(r) / r["bytes_per_worker_step"] for r in runs]
    return f"{median(ratios):.0f}×"


@figure("resnet_bytes", MODELS)
def resnet_bytes(models):
    runs = model_runs(models, "resnet", "gradwire")
    sent = [r["bytes_per_worker_step"] for r in runs]
    return (f"{megabytes(median(sent))} a step against DDP's "
            f"{megabytes(ddp_bytes(runs[0]))}, "
            f"{spread(sent, megabytes, 'seeds')}")


@figure("gpt_bytes_ratio", MODELS)
def gpt_bytes_ratio(models):
    runs = model_runs(models, "gpt", "gradwire", "gradwire-repeat")
    ratios = [ddp_bytes(r) / r["bytes_per_worker_step"] for r in runs]
    return (f"{median(ratios):.0f}× ({seeds(runs)}, "
            f"{spread(ratios, lambda v: f'{v:.0f}×')})")


@figure("resnet_gap", MODELS)
def resnet_gap(models):
    runs = model_runs(models, "resnet", "gradwire")
    ddp = model_runs(models, "resnet", "ddp")
    gap = mean(r["metric"] for r in ddp) - mean(r["metric"] for r in runs)
    return f"{100 * gap:.1f} points"


@figure("resnet_accuracy", MODELS)
def resnet_accuracy(models):
    runs = model_runs(models, "resnet", "gradwire")
    ddp = model_runs(models, "resnet", "ddp")
    ours = [100 * r["metric"] for r in runs]
    theirs = [100 * r["metric"] for r in ddp]
    steps = listed(str(s) for s in sorted({r["steps"] for r in runs}))
    return (f"{mean(ours):.2f}% against DDP's {mean(theirs):.2f}% after "
            f"{steps} steps, means of {len(ours)} seeds "
            f"({min(ours):.2f}–{max(ours):.2f}% against "
            f"{min(theirs):.2f}–{max(theirs):.2f}%)")


GPT_COMPRESSORS = ("gradwire", "ddp-psgd4", "psgd4x2")


def mean_metric(models, model, method):
    return mean(r["metric"] for r in model_runs(models, model, method))


@figure("gpt_gap", POWERSGD)
def gpt_gap(models):
    # The default (Top-K 1%), gradwire's powersgd with its two exchanges
    # (its default since 18b386c) and PyTorch's PowerSGD hook, rank 4, each
    # over its seeds against DDP's over its own; the one-exchange powersgd4
    # rows are the form before that default.
    ddp = mean_metric(models, "gpt", "ddp")
    above = [mean_metric(models, "gpt", m) / ddp - 1
             for m in GPT_COMPRESSORS]
    return f"{100 * min(above):.0f}–{100 * max(above):.0f}%"


@figure("gpt_gap_runs", POWERSGD)
def gpt_gap_runs(models):
    counts = {len(model_runs(models, "gpt", m))
              for m in GPT_COMPRESSORS + ("ddp",)}
    if len(counts) != 1:
        raise ValueError("the GPT's methods ran different numbers of seeds")
    runs = model_runs(models, "gpt", *GPT_COMPRESSORS)
    steps = listed(str(s) for s in sorted({r["steps"] for r in runs}))
    return f"{steps} steps, means of {counts.pop()} seeds each"


@figure("gpt_default_vs_hook", POWERSGD)
def gpt_default_vs_hook(models):
    ours = {r["seed"]: r for r in model_runs(models, "gpt", "gradwire")}
    hook = {r["seed"]: r for r in model_runs(models, "gpt", "ddp-psgd4")}
    shared = sorted(set(ours) & set(hook))
    lower = sum(ours[s]["metric"] < hook[s]["metric"] for s in shared)
    fewer = 1 - (median(r["bytes_per_worker_step"] for r in ours.values())
                 / median(r["bytes_per_worker_step"] for r in hook.values()))
    return (f"{mean(ours[s]['metric'] for s in shared):.2f} against "
            f"{mean(hook[s]['metric'] for s in shared):.2f}, lower on "
            f"{lower} of {len(shared)} seeds, with {100 * fewer:.0f}% "
            "fewer bytes")


def accuracy_and_bytes(runs):
    return (f"{100 * mean(r['metric'] for r in runs):.2f}% at "
            f"{megabytes(median(r['bytes_per_worker_step'] for r in runs))}")


@figure("resnet_powersgd", POWERSGD)
def resnet_powersgd(models):
    return accuracy_and_bytes(model_runs(models, "resnet", "psgd4x2")) + \
        " a step"


@figure("resnet_topk", POWERSGD)
def resnet_topk(models):
    return accuracy_and_bytes(model_runs(models, "resnet", "gradwire"))


@figure("resnet_powersgd_seeds", POWERSGD)
def resnet_powersgd_seeds(models):
    counts = {len(model_runs(models, "resnet", m))
              for m in ("psgd4x2", "gradwire")}
    if len(counts) != 1:
        raise ValueError("the two methods ran different numbers of seeds")
    return f"means of {counts.pop()} seeds each"


@figure("resnet_ddp_powersgd", POWERSGD)
def resnet_ddp_powersgd(models):
    runs = model_runs(models, "resnet", "ddp-psgd4")
    return accuracy_and_bytes(runs) + f" a step (mean of {len(runs)} seeds)"


# bench/auto/auto.sh's JSON: the CNN on shaped links, gradwire-worker
# against PyTorch DDP.

def auto_row(document, link, config):
    for row in document["rows"]:
        if row["link"] == link and row["config"] == config and \
                row["status"] == "ok":
            return row
    raise KeyError(f"no {config} row on {link}")


def versus_topk(document, link, peer):
    return auto_row(document, link, peer)["seconds_per_step"] / \
        auto_row(document, link, "topk1")["seconds_per_step"]


@figure("step_vs_ddp_100mbit", AUTO)
def step_vs_ddp_100mbit(auto):
    return times(versus_topk(auto, "100mbit", "ddp"))


@figure("step_vs_ddp_fp16_100mbit", AUTO)
def step_vs_ddp_fp16_100mbit(auto):
    return times(versus_topk(auto, "100mbit", "ddp-fp16"))


@figure("step_vs_compute_100mbit", AUTO)
def step_vs_compute_100mbit(auto):
    return times(auto_row(auto, "100mbit", "topk1")["vs_compute"])


@figure("step_vs_ddp_fast_links", AUTO)
def step_vs_ddp_fast_links(auto):
    return listed(f"{times(versus_topk(auto, link, 'ddp'))} {LINKS[link]}"
                  for link in ("1gbit", "unshaped"))


@figure("step_runs", AUTO)
def step_runs(auto):
    rows = [auto_row(auto, link, config)
            for link in ("100mbit", "1gbit", "unshaped")
            for config in ("topk1", "ddp", "ddp-fp16")]
    rows.append(auto_row(auto, "none", "compute"))
    steps = listed(str(s) for s in sorted({r["steps"] for r in rows}))
    return f"one {steps}-step run per row on a {machine(auto)}"


# gradwire-bench-load's JSON: 64 simulated workers against real shards.

def load_runs(*documents):
    return [run for d in documents for run in d["runs"]]


@figure("load_asp_setup", *LOAD)
def load_asp_setup(*documents):
    configs = {(d["config"]["workers"], d["config"]["mode"],
                d["config"]["shards"]) for d in documents}
    if len(configs) != 1:
        raise ValueError("the runs have different configurations")
    workers, mode, shards = configs.pop()
    return (f"{workers} simulated {mode.upper()} workers against "
            f"{shards} shards")


@figure("load_asp_params", *LOAD)
def load_asp_params(*documents):
    params = {d["config"]["params"] for d in documents}
    if len(params) != 1:
        raise ValueError("the runs have different models")
    return f"{params.pop():,} parameters"


@figure("load_asp_pushes", *LOAD)
def load_asp_pushes(*documents):
    rates = [r["pushes_per_s"] for r in load_runs(*documents)]
    return f"{median(rates):,.0f} pushes/s"


@figure("load_asp_spread", *LOAD)
def load_asp_spread(*documents):
    rates = [r["pushes_per_s"] for r in load_runs(*documents)]
    return spread(rates, lambda v: f"{v:,.0f}")


@figure("load_asp_errors", *LOAD)
def load_asp_errors(*documents):
    return f"{sum(r['errors'] for r in load_runs(*documents)):,} errors"


@figure("load_asp_latency", *LOAD)
def load_asp_latency(*documents):
    runs = load_runs(*documents)
    p50 = median(r["push_latency_ms"]["p50"] for r in runs)
    p99 = median(r["push_latency_ms"]["p99"] for r in runs)
    return f"Push p50 {p50:.1f} ms / p99 {p99:.1f} ms"


@figure("load_asp_memory", *LOAD)
def load_asp_memory(*documents):
    runs = load_runs(*documents)
    over = sum(1 for r in runs if not r["memory_ok"])
    return ("within its limit in every run" if not over else
            f"over its limit in {over} of {len(runs)} runs")


@figure("load_asp_pull_ratio", *LOAD)
def load_asp_pull_ratio(*documents):
    runs = load_runs(*documents)
    return f"{median(r['dense_pulls_vs_pulled'] for r in runs):.1f}×"


@figure("load_machine", *LOAD)
def load_machine(*documents):
    return machine(*documents)


@figure("load_shared_ratio", LOAD_SHARED)
def load_shared_ratio(shared):
    return times(shared["comparison"]["pushes_per_s_ratio"])


@figure("load_publish64_ratio", LOAD_PUBLISH)
def load_publish64_ratio(publish):
    return times(publish["comparison"]["pushes_per_s_ratio"])


@figure("load_compare_machine", LOAD_SHARED, LOAD_PUBLISH)
def load_compare_machine(*documents):
    return machine(*documents)


# gradwire-bench-compress's JSON.

def compress_row(document, compressor, ratio=None, threads=1, chunk=0,
                 numel=25_000_000):
    for row in document["results"]:
        if (row["compressor"], row["ratio"], row["threads"],
                row["chunk_elements"], row["numel"]) == \
                (compressor, ratio, threads, chunk, numel):
            return row
    raise KeyError(f"no {compressor} {ratio} row of {numel} elements on "
                   f"{threads} threads")


@figure("topk_wire_bytes", COMPRESS)
def topk_wire_bytes(compress):
    row = compress_row(compress, "topk", 0.01)
    return f"{row['wire_bytes_per_selected']:.2f}"


@figure("topk_wire_bytes_fp32", COMPRESS)
def topk_wire_bytes_fp32(compress):
    row = compress_row(compress, "topk", 0.01)
    return f"{row['wire_bytes_per_selected_fp32']:.2f}"


@figure("compress_run", COMPRESS)
def compress_run(compress):
    memcpy = compress_row(compress, "memcpy")["seconds"]
    kernels = KERNELS.get(compress["host"].get("instruction_set"), "?")
    return (f"25M floats, one thread, {kernels}, on a {machine(compress)}; "
            f"memcpy {1000 * memcpy:.2f} ms")


COMPRESSORS = (("none", None, "no compression with error feedback"),
               ("fp16", None, "fp16"), ("onebit", None, "1-bit"),
               ("qsgd", None, "QSGD"), ("topk", 0.001, "Top-K 0.1%"),
               ("topk", 0.01, "Top-K 1%"))


@figure("compress_ratios", COMPRESS)
def compress_ratios(compress):
    return ", ".join(
        f"{name} {compress_row(compress, c, r)['vs_memcpy']:.2f}×"
        for c, r, name in COMPRESSORS)


@figure("compress_topk", COMPRESS)
def compress_topk(compress):
    one = compress_row(compress, "topk", 0.01)
    two = compress_row(compress, "topk", 0.01, threads=2, chunk=1 << 20)
    return (f"{1000 * one['seconds']:.1f} ms; {two['vs_memcpy']:.2f}× on 2 "
            f"threads in 1M-float chunks; {one['vs_torch_topk']:.1f}× "
            "faster than `torch::abs().topk()`")


@figure("compress_25m_topk", COMPRESS_25M)
def compress_25m_topk(compress):
    memcpy = compress_row(compress, "memcpy")["seconds"]
    topk = compress_row(compress, "topk", 0.01)["vs_memcpy"]
    return f"{topk:.2f}× (memcpy {1000 * memcpy:.1f} ms)"


# bench/network/network.sh's JSON: shaped links, Top-K against compute.

@figure("network_vs_compute", *NETWORK)
def network_vs_compute(*documents):
    parts = [f"{times(d['topk_vs_compute'])}"
             f"{' the compute-only step' if i == 0 else ''} "
             f"{LINKS[d['link']]}" for i, d in enumerate(documents)]
    steps = listed(str(s) for s in sorted({d["steps"] for d in documents}))
    return f"{listed(parts)} ({steps} steps, one run each)"


# The machines behind every figure above.

@figure("figure_machines", *sorted({p for sources, _ in FIGURES.values()
                                    for p in sources}))
def figure_machines(*documents):
    named = [d for d in documents if machines(d)]
    return (f"{machine(*named)} machines; {len(documents) - len(named)} "
            f"of the "
            f"{len(documents)} data files behind them name no machine")

